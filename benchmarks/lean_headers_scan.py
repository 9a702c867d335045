"""The ``.cu`` file's slim and lean headers (evaluation/builds/slim_headers.py) measured on field kernels:
the figures docs/evaluation.md quotes in "Lean: ``torch/types.h`` itself cut".

    python benchmarks/lean_headers_scan.py time [--kernels N] [--repeats R] [--out FILE.json]
    python benchmarks/lean_headers_scan.py scan [--limit N] [--headers lean|slim|full] [--out FILE.json]

Each field kernel (``--field``: a KernelBenchLeaderboard checkout's ``docs/assets``) is executed with
torch's own ``load_inline`` in place but its build stopped before ninja runs (``_run_ninja_build`` a
no-op): torch writes the ``cuda.cu`` it would compile (its ``torch/types.h``, ``cuda.h`` and
``cuda_runtime.h`` put before the source) and the ``build.ninja`` it would run, and the ``.cu``
command is read back from ``ninja -t commands``: torch's include paths, defines and flags as this
torch writes them. Only the architecture is changed, to ``--arch`` (nvcc's ``-arch=sm_90``: the
docs' figures were measured so). The header folders are slim_headers' own (``ensure`` at each
level), named in ``CPATH`` after whatever it holds, as the build stage does (``stage.build_env``).

``time``: the first N kernels of build_phases' acceptance set, their ``.cu`` compiled (``nvcc -c``)
alternately slim and lean, R times each; wall seconds per compile, and whether all the objects'
device code (their ``.nv_fatbin`` sections) is the same byte for byte.
``scan``: every field CUDA source (or the first ``--limit``) through cudafe++ only (``nvcc --cuda``:
the front end, where every name must resolve), counted: compiled, and failures grouped by their
first error line. Prints a Markdown table; ``--out`` keeps every record as JSON.

Runs field code (the kernels' module-level statements) in this process, as build_phases does.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import types
from collections.abc import Iterator
from typing import Any
from unittest import mock

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from benchmarks.gpu.nvcc_cuts import Cut, apply_cut, ninja_commands, sm_of  # noqa: E402
from evaluation.builds import slim_headers  # noqa: E402

#: ``KB_SLIM_CU_HEADERS`` for each level slim_headers writes a folder for ("full": torch's own, no folder).
LEVEL_SETTING = {"slim": "1", "lean": "2"}
NVCC = "/usr/local/cuda/bin/nvcc"
#: What torch is told to build for: CPU torch cannot ask a GPU, and ``--arch`` replaces it anyway.
TORCH_ARCH_LIST = "9.0"
#: A compile that runs longer is stopped (a lean compile of a field kernel takes about 20 s on 2 cores).
COMPILE_TIMEOUT_S = 900.0
_ARCH_ONLY = Cut("arch_only", arch_only=True)
_MISSING_HEADER = re.compile(r'fatal error: ([^:\s]+): No such file|cannot open source file "([^"]+)"')


def build_phases() -> types.ModuleType:
    """benchmarks/gpu/build_phases.py (the field's folder, its kernels, its runner and host facts),
    imported when first used: importing it sets its process's build environment (``KB_UNITS=0``),
    which a test importing this module's pure parts must not get."""
    from benchmarks.gpu import build_phases as module  # deferred: see above

    return module


# -- pure parts (tests/unit/test_lean_headers_scan.py) ---------------------------------------------
def with_arch(argv: list[str], arch: str) -> list[str]:
    """torch's ``-gencode`` flags replaced by one ``-arch=<arch>`` (``sm_90``: its SASS and PTX);
    ``arch`` "": torch's flags kept."""
    if not arch:
        return list(argv)
    sm = sm_of(arch.removeprefix("sm_"))
    one = apply_cut(argv, _ARCH_ONLY, sm)
    return [f"-arch=sm_{sm}" if a == f"-gencode=arch=compute_{sm},code=sm_{sm}" else a for a in one]


def retargeted(argv: list[str], output: str, front_end_only: bool = False) -> list[str]:
    """The ``.cu`` command writing ``output``; ``front_end_only``: ``--cuda``, which runs cudafe++ and
    the device compile and stops before the host compile."""
    out = list(argv)
    out[out.index("-o") + 1] = output
    if front_end_only:
        out[out.index("-c")] = "--cuda"
    return out


def first_error(output: str) -> str:
    """The compiler's first error line (the rest often follows from it); else the output's first line."""
    lines = [ln.strip() for ln in output.splitlines() if ln.strip()]
    errors = [ln for ln in lines if re.search(r"\berror\b", ln)]
    return (errors or lines or [""])[0][:300]


def error_group(line: str) -> str:
    """What a first error line is: a header this CUDA has not, the deprecated ``x.type()`` where
    ``AT_DISPATCH`` wants a ``ScalarType`` (``DeprecatedTypeProperties``), or other."""
    missing = _MISSING_HEADER.search(line)
    if missing:
        return f"missing {missing.group(1) or missing.group(2)}"
    if "DeprecatedTypeProperties" in line:
        return "type() in AT_DISPATCH"
    return "other"


def scan_summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Counts of a scan: sources compiled, and the failures by group (with their sources)."""
    failed = [r for r in rows if r["rc"] != 0]
    groups: dict[str, list[str]] = {}
    for r in failed:
        groups.setdefault(r["group"], []).append(r["source"])
    return {"sources": len(rows), "compiled": len(rows) - len(failed), "failed": len(failed), "groups": groups}


def scan_table(summary: dict[str, Any], not_captured: int) -> str:
    lines = ["| outcome | sources |", "| --- | ---: |", f"| compiled | {summary['compiled']} |"]
    lines += [f"| failed: {group} | {len(srcs)} |" for group, srcs in sorted(summary["groups"].items())]
    lines += [f"| **total** | **{summary['sources']}** |"]
    if not_captured:
        lines.append(f"\n{not_captured} field file(s) gave no CUDA source (see the JSON's `not_captured`).")
    return "\n".join(lines)


def time_table(records: list[dict[str, Any]], same: dict[str, bool | None]) -> str:
    """One row per compile, in the order they ran; then whether each kernel's objects' device code agreed."""
    lines = ["| kernel | headers | run | wall s | CPU s | rc |", "| --- | --- | ---: | ---: | ---: | ---: |"]
    lines += [
        f"| {r['kernel']} | {r['headers']} | {r['run']} | {r['seconds']:.1f} | {r['cpu_s']:.1f} | {r['rc']} |"
        for r in records
    ]
    verdict = {True: "identical", False: "DIFFERENT", None: "not compared (a compile failed)"}
    lines += ["", "| kernel | `.nv_fatbin` of all its objects |", "| --- | --- |"]
    lines += [f"| {k} | {verdict[v]} |" for k, v in same.items()]
    return "\n".join(lines)


# -- the kernels' .cu files and commands, as torch writes them ---------------------------------------
class _AnyExtension:
    """What the stopped ``load_inline`` returns: any function of it, called at module level, does nothing."""

    def __getattr__(self, name: str) -> Any:
        return lambda *args, **kwargs: None


@contextlib.contextmanager
def torch_writes_only(cuda_home: str, built: list[str], work: str) -> Iterator[None]:
    """``load_inline`` as torch has it, each call in a folder of its own under ``work`` (appended to
    ``built``), stopped before ninja would run and the module be loaded."""
    import torch.utils.cpp_extension as cpp_extension  # deferred: torch only where kernels are read

    real = cpp_extension.load_inline

    def recording(*args: Any, **kwargs: Any) -> Any:
        folder = os.path.join(work, f"ext{len(built)}")
        os.makedirs(folder, exist_ok=True)
        # A fresh versioner: a name seen before would otherwise build as "<name>_v1".
        cpp_extension.JIT_EXTENSION_VERSIONER = cpp_extension.ExtensionVersioner()
        real(*args, **{**kwargs, "build_directory": folder, "verbose": False})
        built.append(folder)
        return _AnyExtension()

    with (
        mock.patch.dict(os.environ, {"TORCH_CUDA_ARCH_LIST": TORCH_ARCH_LIST}),
        mock.patch.object(cpp_extension, "CUDA_HOME", cuda_home),  # CPU torch sets none
        mock.patch.object(cpp_extension, "_run_ninja_build", lambda *a, **k: None),
        mock.patch.object(cpp_extension, "_import_module_from_library", lambda *a, **k: _AnyExtension()),
        mock.patch.object(cpp_extension, "load_inline", recording),
    ):
        yield


def captured_builds(kernel: str, work: str, cuda_home: str) -> tuple[list[dict[str, Any]], str]:
    """The kernel file's ``load_inline`` builds that have a ``.cu`` (folder, its nvcc command), and
    the error that stopped the file's execution ("" if none)."""
    built: list[str] = []
    error = ""
    with open(kernel, encoding="utf-8") as fh:
        code = compile(fh.read(), kernel, "exec")
    with torch_writes_only(cuda_home, built, work), contextlib.redirect_stdout(io.StringIO()):
        try:
            exec(code, {"__name__": "field_kernel", "__file__": kernel})  # noqa: S102 - as build_phases does
        except (Exception, SystemExit) as exc:  # noqa: BLE001 - the builds before it still count
            error = f"{type(exc).__name__}: {exc}"[:300]
    ninja = shutil.which("ninja") or os.path.join(os.path.dirname(sys.executable), "ninja")
    builds = []
    for folder in built:
        listed = subprocess.run([ninja, "-C", folder, "-t", "commands"], capture_output=True, text=True)
        cu = ninja_commands(listed.stdout).cu
        if cu:
            builds.append({"folder": folder, "cu": cu})
    return builds, error


def field_kernel_path(field: str, name: str) -> str:
    return os.path.join(field, "solutions", f"{name}.py")


def all_field_names(field: str) -> list[str]:
    return sorted(n.removesuffix(".py") for n in os.listdir(os.path.join(field, "solutions")) if n.endswith(".py"))


# -- compiling ---------------------------------------------------------------------------------------
def header_folder(root: str, level: str) -> str | None:
    """slim_headers' folder for ``level`` under the cache root ``root`` (None: "full", torch's own)."""
    if level == "full":
        return None
    with mock.patch.dict(os.environ, {"KB_SLIM_CU_HEADERS": LEVEL_SETTING[level]}):
        folder = slim_headers.ensure(root)
    if folder is None:
        raise OSError(f"slim_headers could not write the {level} folder under {root}")
    return folder


def compile_env(folder: str | None) -> dict[str, str]:
    """The compile's environment: the header folder after whatever ``CPATH`` holds (stage.build_env)."""
    env = dict(os.environ)
    env["CPATH"] = os.pathsep.join(p for p in (env.get("CPATH"), folder) if p)
    return env


def run_nvcc(argv: list[str], cwd: str, folder: str | None) -> dict[str, Any]:
    """``run_bounded``'s record of one compile, with the CPU seconds of its process tree."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    row = build_phases().run_bounded(argv, cwd, compile_env(folder), time.monotonic() + COMPILE_TIMEOUT_S)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    row["cpu_s"] = round(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, 2)
    return row


def fatbin_digest(obj: str) -> str:
    """sha256 of the object's ``.nv_fatbin`` section (its device code); "" if it cannot be read."""
    section = f"{obj}.nv_fatbin"
    done = subprocess.run(["objcopy", "-O", "binary", "--only-section=.nv_fatbin", obj, section], capture_output=True)
    if done.returncode != 0 or not os.path.exists(section):
        return ""
    with open(section, "rb") as fh:
        data = fh.read()
    return hashlib.sha256(data).hexdigest() if data else ""


# -- the two modes -----------------------------------------------------------------------------------
def time_kernel(
    args: argparse.Namespace, kernel: tuple[int, int, str], folders: dict[str, str | None]
) -> dict[str, Any]:
    """One kernel's ``.cu`` compiled alternately slim and lean, ``args.repeats`` times each."""
    level, problem, name = kernel
    label = f"L{level} P{problem} {name[:8]}"
    builds, error = captured_builds(field_kernel_path(args.field, name), os.path.join(args.work, name), args.cuda_home)
    if not builds:
        return {"kernel": label, "file": name, "error": error or "no .cu", "records": [], "same_fatbin": None}
    cu = with_arch(builds[0]["cu"], args.arch)
    print(f"{label}: {subprocess.list2cmdline(cu)}", flush=True)
    records, digests = [], []
    for run in range(1, args.repeats + 1):
        for headers in ("slim", "lean"):  # alternately: a drift of the machine's speed falls on both
            obj = f"{headers}_{run}.o"
            row = run_nvcc(retargeted(cu, obj), builds[0]["folder"], folders[headers])
            records.append(
                {"kernel": label, "headers": headers, "run": run, "seconds": row["seconds"], "cpu_s": row["cpu_s"],
                 "rc": row["rc"], "error": first_error(row.get("output", "")) if row["rc"] != 0 else ""}
            )  # fmt: skip
            print(
                f"  {headers} run {run}: {row['seconds']:.1f} s wall, {row['cpu_s']:.1f} s CPU, rc {row['rc']}",
                flush=True,
            )
            digests.append(fatbin_digest(os.path.join(builds[0]["folder"], obj)) if row["rc"] == 0 else "")
    same = None if "" in digests else len(set(digests)) == 1
    return {"kernel": label, "file": name, "command": cu, "records": records, "fatbins": digests, "same_fatbin": same}


def time_mode(args: argparse.Namespace) -> tuple[dict[str, Any], str]:
    folders = {level: header_folder(os.path.join(args.work, "cache"), level) for level in ("slim", "lean")}
    kernels = [time_kernel(args, k, folders) for k in build_phases().KERNELS[: args.kernels]]
    records = [r for k in kernels for r in k["records"]]
    same = {k["kernel"]: k["same_fatbin"] for k in kernels}
    return {"kernels": kernels}, time_table(records, same)


def scan_builds(args: argparse.Namespace, name: str, folder: str | None, rows: list[dict[str, Any]]) -> str:
    """The file's CUDA sources through cudafe++, appended to ``rows`` up to the limit; the file's
    execution error if it gave none."""
    builds, error = captured_builds(field_kernel_path(args.field, name), os.path.join(args.work, name), args.cuda_home)
    for i, build in enumerate(builds):
        if args.limit and len(rows) >= args.limit:
            break
        cu = retargeted(with_arch(build["cu"], args.arch), "cudafe.ii", front_end_only=True)
        row = run_nvcc(cu, build["folder"], folder)
        # The build folder's path is this run's: the line is read (and grouped) without it.
        line = first_error(row.get("output", "")).replace(build["folder"] + os.sep, "") if row["rc"] != 0 else ""
        source = f"{name}#{i}" if len(builds) > 1 else name
        rows.append(
            {"source": source, "rc": row["rc"], "seconds": row["seconds"], "cpu_s": row["cpu_s"],
             "group": error_group(line) if row["rc"] != 0 else "", "first_error": line}
        )  # fmt: skip
        print(f"  {len(rows):4} {source}: rc {row['rc']} {row['seconds']:.1f} s {line[:120]}", flush=True)
    return "" if builds else (error or "no load_inline build with a .cu")


def scan_mode(args: argparse.Namespace) -> tuple[dict[str, Any], str]:
    folder = header_folder(os.path.join(args.work, "cache"), args.headers)
    rows: list[dict[str, Any]] = []
    not_captured: list[dict[str, str]] = []
    for name in args.files or all_field_names(args.field):
        if args.limit and len(rows) >= args.limit:
            break
        why = scan_builds(args, name, folder, rows)
        if why:
            not_captured.append({"file": name, "why": why})
    summary = scan_summary(rows)
    report = {"headers": args.headers, "rows": rows, "summary": summary, "not_captured": not_captured}
    return report, scan_table(summary, len(not_captured))


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=("time", "scan"))
    parser.add_argument("--field", default=build_phases().FIELD, help="a KernelBenchLeaderboard checkout's docs/assets")
    parser.add_argument("--kernels", type=int, default=1, help="time: how many of build_phases.KERNELS")
    parser.add_argument("--repeats", type=int, default=2, help="time: compiles per kernel and level")
    parser.add_argument("--limit", type=int, default=0, help="scan: the first N CUDA sources (0: all)")
    parser.add_argument("--files", nargs="*", default=[], help="scan: these solutions (names without .py) only")
    parser.add_argument("--headers", choices=("lean", "slim", "full"), default="lean", help="scan: the .cu's headers")
    parser.add_argument("--arch", default="sm_90", help="nvcc -arch in place of torch's -gencode (\"\": torch's)")
    parser.add_argument("--nvcc", default=NVCC, help="its CUDA is torch's CUDA_HOME")
    parser.add_argument("--out", default="", help="the JSON report")
    parser.add_argument("--work", default="", help="where the builds are written (default: a temporary folder)")
    args = parser.parse_args(argv)
    args.cuda_home = os.path.dirname(os.path.dirname(os.path.realpath(args.nvcc)))
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    keep = bool(args.work)
    args.work = os.path.abspath(args.work or tempfile.mkdtemp(prefix="lean_headers_scan_"))
    os.makedirs(args.work, exist_ok=True)
    nvcc_version = subprocess.run([args.nvcc, "--version"], capture_output=True, text=True).stdout.strip()
    facts = {**build_phases().host_facts(), "nvcc": nvcc_version.splitlines()[-1] if nvcc_version else args.nvcc}
    print(f"host: {facts}", flush=True)
    t0 = time.monotonic()
    try:
        report, table = (time_mode if args.mode == "time" else scan_mode)(args)
    finally:
        if not keep:
            shutil.rmtree(args.work, ignore_errors=True)
    report = {"mode": args.mode, "argv": sys.argv, "host": facts, "arch": args.arch, **report}
    report["seconds"] = round(time.monotonic() - t0, 1)
    print(table)
    print(f"{args.mode}: {report['seconds']} s", flush=True)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as fh:
            json.dump(report, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
