"""The ``.cu`` file's lean or slim torch headers (``evaluation.builds.slim_headers``).

- the stand-in routes by compile: gcc's preprocessor, with the folder in ``CPATH`` before torch's
  ``-isystem`` folders as in a build, gives a CUDA compile ``torch/types.h`` and a C++ one the real
  header (a fake torch include tree: milliseconds, no CUDA needed);
- it is written once and never rewritten while right (ninja's dependency records name it);
- a source the slim header does not compile is built again with the real one (the build process is
  replaced by a stand-in here: nvcc is not on the CPU machines; the GPU test below builds for real);
- on a GPU (skips without CUDA): a CUDA kernel built both ways has the same exported functions and
  bitwise the same outputs, and one that needs torch's C++ frontend in its ``.cu`` is built again
  with the real header.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys

import pytest

from evaluation.builds import slim_headers
from evaluation.builds import stage as build_stage
from evaluation.builds.stage import build_dir_for, prebuild
from evaluation.results.types import EvaluationConfig
from tests.evaluation.helpers import needs_cuda
from tests.evaluation.test_pch import CUDA_KERNEL as PCH_CUDA_KERNEL

needs_cxx = pytest.mark.skipif(shutil.which("c++") is None, reason="needs a C++ compiler")


def _fake_torch(root) -> str:
    inc = root / "torch_include"
    (inc / "torch").mkdir(parents=True)
    (inc / "torch" / "extension.h").write_text("int real_extension_h;\n")
    (inc / "torch" / "types.h").write_text("int types_h_only;\n")
    (inc / "ATen" / "core").mkdir(parents=True)
    (inc / "ATen" / "ops").mkdir()
    (inc / "ATen" / "core" / "Tensor.h").write_text("int aten_tensor_h;\n")
    (inc / "ATen" / "Dispatch.h").write_text("int aten_dispatch_h;\n")
    (inc / "ATen" / "TensorOperators.h").write_text("int aten_operators_h;\n")
    (inc / "ATen" / "TensorIndexing.h").write_text("#ifdef AT_PER_OPERATOR_HEADERS\nint aten_indexing_h;\n#endif\n")
    for name in slim_headers.LEAN_OPS:
        (inc / "ATen" / "ops" / f"{name}.h").write_text(f"int op_{name};\n")
    return str(inc)


def _preprocess(tmp_path, cpath: str, *defines: str, header: str = "torch/extension.h") -> str:
    src = tmp_path / "k.cpp"
    src.write_text(f"#include <{header}>\n#include <{header}>\n")
    env = {**os.environ, "CPATH": cpath}
    shutil.rmtree(tmp_path / "torch_include", ignore_errors=True)
    cmd = ["c++", "-E", "-P", *defines, "-isystem", _fake_torch(tmp_path), str(src)]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, check=True).stdout


@needs_cxx
def test_slim_gives_a_cuda_compile_types_h_and_a_cpp_compile_the_real_header(tmp_path, monkeypatch):
    monkeypatch.setenv("KB_SLIM_CU_HEADERS", "1")
    folder = slim_headers.ensure(str(tmp_path / "cache"))
    assert folder is not None and folder.endswith(os.path.join("slim-cu-1", "include"))
    cuda = _preprocess(tmp_path, folder, "-D__CUDACC__")
    assert "types_h_only" in cuda and "real_extension_h" not in cuda
    cpp = _preprocess(tmp_path, folder)
    assert "real_extension_h" in cpp and "types_h_only" not in cpp


@needs_cxx
def test_lean_gives_a_cuda_compile_the_tensor_and_its_operators_and_nothing_else_of_torch(tmp_path, monkeypatch):
    monkeypatch.setenv("KB_SLIM_CU_HEADERS", "2")
    folder = slim_headers.ensure(str(tmp_path / "cache"))
    assert folder is not None and folder.endswith(os.path.join("lean-cu-1", "include"))
    for header in ("torch/extension.h", "torch/types.h"):  # the source's include, and load_inline's
        cuda = _preprocess(tmp_path, folder, "-D__CUDACC__", header=header)
        marks = ("aten_tensor_h", "aten_dispatch_h", "aten_operators_h", "aten_indexing_h", "op_zeros_like")
        assert all(m in cuda for m in marks), header
        assert "types_h_only" not in cuda and "real_extension_h" not in cuda, header
        assert "constexpr auto kFloat32 = at::kFloat;" in cuda and cuda.count("namespace torch {") == 1, header
    cpp = _preprocess(tmp_path, folder, header="torch/types.h")
    assert "types_h_only" in cpp and "aten_tensor_h" not in cpp and "namespace torch" not in cpp
    assert "real_extension_h" in _preprocess(tmp_path, folder)


def test_the_headers_are_written_once_and_mended_when_wrong(tmp_path, monkeypatch):
    monkeypatch.setenv("KB_SLIM_CU_HEADERS", "2")
    cache = str(tmp_path / "cache")
    folder = slim_headers.ensure(cache)
    assert sorted(os.listdir(os.path.join(folder, "torch"))) == ["extension.h", "types.h"]
    path = os.path.join(folder, "torch", "types.h")
    assert os.stat(path).st_mode & 0o777 == 0o644
    os.utime(path, (1_000_000, 1_000_000))
    assert slim_headers.ensure(cache) == folder
    assert os.stat(path).st_mtime == 1_000_000  # untouched: entries built with it stay up to date
    with open(path, "w") as fh:
        fh.write("#error broken\n")
    slim_headers.ensure(cache)
    with open(path) as fh:
        assert fh.read() == slim_headers.LEAN_TYPES_TEXT
    assert sorted(os.listdir(os.path.dirname(path))) == ["extension.h", "types.h"]


def test_only_cuda_builds_get_it(monkeypatch):
    assert slim_headers.enabled("cuda") and not slim_headers.enabled("cpu")
    assert slim_headers.level() == "lean"
    monkeypatch.setenv("KB_SLIM_CU_HEADERS", "1")
    assert slim_headers.level() == "slim" and slim_headers.enabled("cuda")
    monkeypatch.setenv("KB_SLIM_CU_HEADERS", "0")
    assert not slim_headers.enabled("cuda")


NEEDS_BUILD = "from torch.utils.cpp_extension import load_inline  # a build\nclass ModelNew: pass\n"


def _fake_build_process(calls: list[dict], fails_slim: bool):
    """Stands in for the sandboxed build (nvcc is not on the CPU machines); records its CPATH."""

    def run(build, kernel_source, cfg, deadline, out, slim_cu=False):
        calls.append(
            {"slim": slim_cu, "cpath": build_stage.build_env(cfg, slim_cu).get("CPATH", ""), "private": build.private}
        )
        if slim_cu and fails_slim:
            return {"ok": False, "kind": "compile_error", "error": "'functional' is not a member of 'torch::nn'"}
        return {"ok": True}

    return run


@pytest.mark.parametrize("fails_slim", [False, True])
def test_a_source_the_slim_header_fails_is_built_again_with_the_real_one(tmp_path, monkeypatch, fails_slim):
    calls: list[dict] = []
    monkeypatch.setattr(build_stage, "_run_build_process", _fake_build_process(calls, fails_slim))
    monkeypatch.setenv("KB_PCH", "0")
    cfg = EvaluationConfig(device="cuda", cuda_arch="9.0", build_cache_dir=str(tmp_path / "cache"))
    out = prebuild(NEEDS_BUILD, cfg)
    assert out.status == "built" and out.error is None
    assert [c["slim"] for c in calls] == ([True, False] if fails_slim else [True])
    assert slim_headers.include_dir(cfg.build_cache_dir) in calls[0]["cpath"]
    assert out.cu_headers == ("full" if fails_slim else "lean")
    if fails_slim:
        assert calls[1]["cpath"] == "" and calls[1]["private"] != calls[0]["private"]
        assert not os.path.exists(calls[0]["private"])  # the slim try's folder is gone
    assert build_dir_for(NEEDS_BUILD, cfg).built


def test_a_cpu_build_never_gets_it(tmp_path, monkeypatch):
    calls: list[dict] = []
    monkeypatch.setattr(build_stage, "_run_build_process", _fake_build_process(calls, True))
    cfg = EvaluationConfig(device="cpu", build_cache_dir=str(tmp_path / "cache"))
    out = prebuild(NEEDS_BUILD, cfg)
    assert [c["slim"] for c in calls] == [False] and out.cu_headers == ""


# test_pch's CUDA kernel (its .cu includes torch/extension.h), named per test, with a hook on its result.
CUDA_KERNEL = PCH_CUDA_KERNEL.replace('"kb_pch_cuda"', '"NAME"').replace("return out;", "return EXTRA(out);")
assert '"NAME"' in CUDA_KERNEL and "EXTRA(out)" in CUDA_KERNEL
PLAIN = CUDA_KERNEL.replace("EXTRA(out)", "out")
# torch::nn::functional is torch's C++ frontend: in torch/extension.h, not in torch/types.h.
NEEDS_FRONTEND = CUDA_KERNEL.replace("EXTRA(out)", "torch::nn::functional::relu(out)")

PROBE = """
import importlib.util, sys, torch
outs = []
for path in sys.argv[1:]:
    spec = importlib.util.spec_from_file_location('kb_slim_cuda', path)
    m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
    x = torch.randn(1 << 20, generator=torch.Generator().manual_seed(7)).cuda()
    outs.append((sorted(n for n in dir(m) if not n.startswith('__')), m.scale_shift(x, 1.5).cpu()))
for names, out in outs:
    assert names == ['scale_shift'], names
    assert out.view(torch.int32).equal(outs[0][1].view(torch.int32))
print('same')
"""


def _built(source: str, cfg: EvaluationConfig) -> tuple[build_stage.BuildOutcome, str]:
    out = prebuild(source, cfg)
    assert out.status == "built", (out.error, out.log[-3000:])
    (ext,) = glob.glob(os.path.join(build_dir_for(source, cfg).path or "", "torch_extensions", "*"))
    return out, ext


@needs_cuda
@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_a_cuda_kernel_built_both_ways_is_the_same(tmp_path, monkeypatch):
    monkeypatch.setenv("KB_PCH", "0")  # the wrapper the same way both times: only the .cu differs
    libs, cu_s = [], {}
    for slim, headers in (("2", "lean"), ("1", "slim"), ("0", "full")):
        monkeypatch.setenv("KB_SLIM_CU_HEADERS", slim)
        cfg = EvaluationConfig(device="cuda", build_cache_dir=str(tmp_path / f"slim{slim}"), timeout_s=9000)
        out, ext = _built(PLAIN.replace("NAME", "kb_slim_cuda"), cfg)
        assert out.cu_headers == headers
        cu_s[headers] = [s for k, s in out.steps_s.items() if k.endswith(".cuda.o")]
        libs.append(os.path.join(ext, "kb_slim_cuda.so"))
    print(f"the .cu file's compile (s): {cu_s}")
    r = subprocess.run([sys.executable, "-c", PROBE, *libs], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0 and r.stdout.strip() == "same", r.stdout + r.stderr


@needs_cuda
@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_a_cu_file_that_needs_the_frontend_is_built_with_the_real_header(tmp_path, monkeypatch):
    monkeypatch.setenv("KB_PCH", "0")
    cfg = EvaluationConfig(device="cuda", build_cache_dir=str(tmp_path / "cache"), timeout_s=9000)
    out, _ext = _built(NEEDS_FRONTEND.replace("NAME", "kb_slim_frontend"), cfg)
    assert out.cu_headers == "full"
