"""Run one kernel once per built variant of its extension, on fixed inputs on the GPU, and print one
JSON line per variant with a hash of its outputs' bytes (benchmarks/gpu/build_phases.py compares
them with the uncut build's). The kernel's ``load_inline`` is replaced by a loader of the variant's
``.so``, so nothing is compiled here. The first variant runs twice: a kernel whose two runs of the
same build differ is nondeterministic, and no cut is judged by its bits.

    python benchmarks/gpu/build_phases_check.py PROBLEM.py KERNEL.py VARIANTS_JSON
    (VARIANTS_JSON: [[name, so_path, module_name], ...])
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import json
import sys
import time
from typing import Any

SEED = 1234


def load_so(path: str, name: str) -> Any:
    loader = importlib.machinery.ExtensionFileLoader(name, path)
    spec = importlib.util.spec_from_file_location(name, path, loader=loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def output_hash(out: Any) -> str:
    import torch  # deferred: imported once the variants are known

    h = hashlib.sha256()
    for t in out if isinstance(out, (tuple, list)) else [out]:
        if isinstance(t, torch.Tensor):
            h.update(str((t.dtype, tuple(t.shape))).encode())
            h.update(t.detach().contiguous().cpu().view(-1).view(torch.uint8).numpy().tobytes())
        else:
            h.update(repr(t).encode())
    return h.hexdigest()


def run_variant(problem: dict[str, Any], kernel_source: str, so_path: str, name: str) -> str:
    import torch  # deferred: imported once the variants are known
    import torch.utils.cpp_extension as cpp_extension  # deferred: as torch

    module = load_so(so_path, name)
    original = cpp_extension.load_inline
    cpp_extension.load_inline = lambda *a, **k: module  # the kernel's build is the variant's
    try:
        scope: dict[str, Any] = {"__name__": "kb_kernel"}
        exec(compile(kernel_source, "kernel.py", "exec"), scope)
    finally:
        cpp_extension.load_inline = original
    torch.manual_seed(SEED)
    model = scope["ModelNew"](*problem["get_init_inputs"]()).cuda()
    torch.manual_seed(SEED)
    inputs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in problem["get_inputs"]()]
    with torch.no_grad():
        out = model(*inputs)
    torch.cuda.synchronize()
    return output_hash(out)


def main() -> None:
    problem_path, kernel_path, variants = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    problem: dict[str, Any] = {"__name__": "kb_problem"}
    with open(problem_path, encoding="utf-8") as fh:
        exec(compile(fh.read(), problem_path, "exec"), problem)
    with open(kernel_path, encoding="utf-8") as fh:
        kernel_source = fh.read()
    runs = [variants[0], *variants] if variants else []
    for i, (name, so_path, module_name) in enumerate(runs):
        label = f"{name}#again" if i == 0 else name
        t0 = time.monotonic()
        try:
            row = {"variant": label, "hash": run_variant(problem, kernel_source, so_path, module_name)}
        except Exception as exc:  # noqa: BLE001 - reported per variant; the others still run
            row = {"variant": label, "error": f"{type(exc).__name__}: {exc}"[:400]}
        row["seconds"] = round(time.monotonic() - t0, 2)
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
