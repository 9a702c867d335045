"""Build times of load_inline kernels before and after the host's precompiled torch headers (and, for
CUDA, the ``.cu`` file's slim ``torch/extension.h``: evaluation/builds/slim_headers.py; and the unit cache:
evaluation/builds/units.py), through
the build stage itself (sandboxed build processes, ``evaluation.builds.stage.prebuild``), per step
(ninja's own record: the C++ wrapper ``main.o``, the ``.cu`` file, the link), with each build's CPU
seconds and peak memory.

Phases (each in a fresh cache folder unless said; a phase is skipped when the time budget is spent):

  1. alone, before    the first kernel, headers off, the .cu's slim header off, no unit server
                      (the code before)
  2. headers          the host's precompiled headers built once (what the first build after a
                      restart pays; "cold" = 2 + 3)
  3. alone, after     the first kernel again, headers published ("warm"); its wrapper compiled by the
                      unit server (a miss)
  4. again            the same source once more: found in the build cache (a re-submission)
  4b. same wrapper    the first kernel with another Python side (a comment added): not in the build
                      cache, its wrapper served from the unit cache (a hit)
  5. pool, before     the other kernels through a build pool, headers off
  6. pool, after      the same kernels through a build pool, headers published

    python benchmarks/build_times.py --out DIR [--device cpu|cuda] [--kernels PATH ...] [--limit N]
        [--workers N] [--budget-s S]

With no ``--kernels``, two C++ kernels written here (CPU). ``--kernels`` takes kernel files or
folders (every ``*.py`` under them that calls ``load_inline``). Figures print; ``DIR/build_times.json``
keeps every outcome.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from typing import Any

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from benchmarks.wrapper_kernel import wrapper_kernel  # noqa: E402
from evaluation.builds.entry import needs_build  # noqa: E402
from evaluation.builds.stage import BuildPool, header_cache_for, prebuild, target_arch  # noqa: E402
from evaluation.results.types import EvaluationConfig  # noqa: E402


def kernel_sources(paths: list[str], limit: int) -> list[tuple[str, str]]:
    if not paths:
        return [(f"cpp_{n}", wrapper_kernel(f"kb_bench_{n}")) for n in ("a", "b", "c")][: max(2, limit)]
    files: list[str] = []
    for p in paths:
        files += sorted(glob.glob(os.path.join(p, "**", "*.py"), recursive=True)) if os.path.isdir(p) else [p]
    out = []
    for f in files:
        with open(f, encoding="utf-8") as fh:
            src = fh.read()
        if needs_build(src):
            out.append((os.path.relpath(f), src))
    return out[:limit]


def step_figures(steps: dict[str, float]) -> dict[str, float]:
    """ninja's per-output seconds, by kind: main.o (the wrapper), *.cuda.o (the .cu), the .so (link)."""
    out: dict[str, float] = {}
    for name, s in steps.items():
        kind = (
            "wrapper"
            if name.endswith("/main.o")
            else "cu"
            if name.endswith(".cuda.o")
            else "link"
            if name.endswith(".so")
            else "other"
        )
        out[kind] = round(out.get(kind, 0.0) + s, 2)
    return out


def record(phase: str, name: str, outcome: Any) -> dict[str, Any]:
    d = outcome.to_dict()
    return {"phase": phase, "kernel": name, **d, "steps": step_figures(outcome.steps_s)}


def show(r: dict[str, Any]) -> None:
    steps = " ".join(f"{k} {v:.1f}s" for k, v in sorted(r["steps"].items()))
    print(
        f"  {r['phase']:<14} {r['kernel'][:48]:<48} {r['status']:<13} wall {r['seconds']:6.1f} s  "
        f"cpu {r.get('cpu_s', 0):6.1f} s  peak {r.get('peak_rss_mb', 0):6.0f} MB  headers {r['headers'] or '-':<6} "
        f"cu {r.get('cu_headers') or '-':<5} units {r.get('units') or '-'} "
        f"[{steps}]",
        flush=True,
    )


def pool_phase(
    phase: str, kernels: list[tuple[str, str]], cfg: EvaluationConfig, workers: int | None
) -> dict[str, Any]:
    t0 = time.monotonic()
    with BuildPool(workers, cfg) as pool:
        futs = [(n, pool.submit(s)) for n, s in kernels]
        rows = [record(phase, n, f.result()) for n, f in futs]
        sizing = pool.sizer.describe()
    for r in rows:
        show(r)
    wall = time.monotonic() - t0
    built = [r["seconds"] for r in rows if r["status"] == "built"]
    summary = {
        "phase": phase,
        "kernels": len(rows),
        "wall_s": round(wall, 1),
        "pool": sizing,
        "build_median_s": statistics.median(built) if built else None,
        "build_p90_s": sorted(built)[max(0, int(0.9 * len(built)) - 1)] if built else None,
        "cpu_s_total": round(sum(r.get("cpu_s", 0) for r in rows), 1),
        "builds_per_min": round(len(built) / wall * 60, 2) if wall > 0 else None,
    }
    print(
        f"  {phase}: {len(rows)} builds in {wall:.0f} s wall, median {summary['build_median_s']} s, "
        f"{summary['cpu_s_total']} s CPU, pool {sizing}",
        flush=True,
    )
    return {"rows": rows, "summary": summary}


def same_objects(cache_a: str, cache_b: str) -> dict[str, bool]:
    """Object files of the same build in two caches, byte for byte (per extension/object)."""
    out: dict[str, bool] = {}
    for obj in glob.glob(os.path.join(cache_a, "*", "torch_extensions", "*", "*.o")):
        rel = os.path.relpath(obj, cache_a).split(os.sep, 1)[1]
        twins = glob.glob(os.path.join(cache_b, "*", rel))
        if twins:
            with open(obj, "rb") as fa, open(twins[0], "rb") as fb:
                out[rel] = fa.read() == fb.read()
    return out


def nvcc_probe() -> dict[str, Any]:
    """What nvcc runs for a .cu file (``--dryrun``): the host compiler's input is cudafe++'s output
    (``*.cudafe1.cpp``, headers already expanded), which is why no precompiled header applies there."""
    import shutil as _sh  # deferred: only with --device cuda
    import subprocess  # deferred: only with --device cuda

    nvcc = _sh.which("nvcc") or os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"), "bin", "nvcc")
    with tempfile.TemporaryDirectory() as tmp:
        cu = os.path.join(tmp, "k.cu")
        with open(cu, "w", encoding="utf-8") as fh:
            fh.write("#include <cuda_runtime.h>\n__global__ void k(float* x) { x[0] = 1.0f; }\n")
        try:
            r = subprocess.run(
                [nvcc, "--dryrun", "-c", cu, "-o", os.path.join(tmp, "k.o")], capture_output=True, text=True, timeout=60
            )
        except (OSError, subprocess.SubprocessError) as exc:
            return {"error": str(exc)}
    steps = [
        line[3:].strip() for line in r.stderr.splitlines() if line.startswith("#$ ") and "=" not in line.split()[1][:1]
    ]
    host = [
        c for c in steps if ("gcc" in c.split()[0] or "g++" in c.split()[0] or "c++" in c.split()[0]) and " -c " in c
    ]
    return {
        "steps": [c.split()[0] for c in steps],
        "host_compile": host,
        "host_input_is_cudafe_output": any(".cudafe1.cpp" in c for c in host),
    }


def _headers_on(on: bool) -> None:
    """The cuts on (after) or off (before): the wrapper's precompiled headers, the .cu's slim header,
    the unit server."""
    os.environ["KB_PCH"] = os.environ["KB_SLIM_CU_HEADERS"] = os.environ["KB_UNITS"] = "1" if on else "0"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    ap.add_argument("--kernels", nargs="*", default=[])
    ap.add_argument("--limit", type=int, default=12)
    ap.add_argument("--workers", type=int, default=None, help="builds at once (default: sized by the pool)")
    ap.add_argument("--arch", default=None, help="TORCH_CUDA_ARCH_LIST (default: the GPU's)")
    ap.add_argument("--budget-s", type=float, default=480.0)
    ap.add_argument("--work", default=None, help="folder for the cache folders (default: a temporary one)")
    return ap.parse_args(argv)


def phase_configs(args: argparse.Namespace, work: str) -> tuple[EvaluationConfig, dict[str, EvaluationConfig]]:
    """The base configuration (the GPU's arch when none is given) and one per cache folder."""
    base = EvaluationConfig(device=args.device, timeout_s=900, cuda_arch=args.arch)
    if args.device == "cuda" and not base.cuda_arch:
        base = EvaluationConfig(device="cuda", timeout_s=900, cuda_arch=target_arch(base) or None)
    cfg = {
        name: EvaluationConfig(
            device=base.device, timeout_s=900, cuda_arch=base.cuda_arch, build_cache_dir=os.path.join(work, name)
        )
        for name in ("before", "after", "pool_before")
    }
    return base, cfg


def new_result(args: argparse.Namespace, base: EvaluationConfig, kernels: list[tuple[str, str]]) -> dict[str, Any]:
    return {
        "host": {
            "cpus": len(os.sched_getaffinity(0)),
            "machine": platform.node(),
            "python": platform.python_version(),
            "device": args.device,
            "arch": base.cuda_arch,
            "load_avg_start": os.getloadavg(),
        },
        "kernels": [n for n, _ in kernels],
        "phases": {},
    }


def save(result: dict[str, Any], out: str) -> None:
    result["host"]["load_avg_end"] = os.getloadavg()
    with open(os.path.join(out, "build_times.json"), "w", encoding="utf-8") as fh:
        json.dump(result, fh, indent=1, default=str)


def alone_before_phase(first_name: str, first: str, cfg: dict[str, EvaluationConfig], result: dict[str, Any]) -> None:
    _headers_on(False)
    print("1. alone, before (headers off)", flush=True)
    r = record("alone_before", first_name, prebuild(first, cfg["before"]))
    show(r)
    result["phases"]["alone_before"] = r


def headers_phase(cfg: dict[str, EvaluationConfig], result: dict[str, Any]) -> None:
    _headers_on(True)
    print("2. the host's precompiled headers", flush=True)
    headers = header_cache_for(cfg["after"])
    t0 = time.monotonic()
    ok = headers.ensure(wait_s=900.0)
    result["phases"]["headers"] = {"ok": ok, "wall_s": round(time.monotonic() - t0, 1), "manifest": headers.manifest()}
    print(
        f"  built: {ok} in {time.monotonic() - t0:.1f} s wall, {headers.manifest().get('cpu_s')} s CPU, "
        f"peak {headers.manifest().get('max_rss_mb')} MB, bytes {headers.manifest().get('bytes')}",
        flush=True,
    )


def warm_phases(first_name: str, first: str, cfg: dict[str, EvaluationConfig], result: dict[str, Any]) -> None:
    """Phases 3, 4 and 4b: the first kernel with the headers published, again, and another source."""
    print("3. alone, after (headers published)", flush=True)
    r = record("alone_after", first_name, prebuild(first, cfg["after"]))
    show(r)
    result["phases"]["alone_after"] = r
    result["phases"]["same_objects"] = same_objects(cfg["before"].build_cache_dir, cfg["after"].build_cache_dir)
    print(f"  objects the same byte for byte, before and after: {result['phases']['same_objects']}", flush=True)
    print("4. the same source again (build cache)", flush=True)
    t0 = time.monotonic()
    again = prebuild(first, cfg["after"])
    result["phases"]["again"] = {"status": again.status, "wall_s": round(time.monotonic() - t0, 3)}
    print(f"  {again.status} in {time.monotonic() - t0:.3f} s", flush=True)
    print("4b. the same wrapper, another source (unit cache)", flush=True)
    r = record("unit_hit", first_name, prebuild(first + "\n# the same wrapper, another source\n", cfg["after"]))
    show(r)
    result["phases"]["unit_hit"] = r


def pool_phases(
    args: argparse.Namespace,
    t_begin: float,
    rest: list[tuple[str, str]],
    cfg: dict[str, EvaluationConfig],
    result: dict[str, Any],
) -> None:
    """Phases 5 and 6, each skipped when less than a minute of the budget is left."""
    for phase, pch, c in (("pool_before", "0", cfg["pool_before"]), ("pool_after", "1", cfg["after"])):
        if args.budget_s - (time.monotonic() - t_begin) < 60:
            print(f"{phase}: skipped (budget spent)", flush=True)
            continue
        _headers_on(pch == "1")
        print(f"{'5' if pch == '0' else '6'}. {phase}: {len(rest)} kernels", flush=True)
        result["phases"][phase] = pool_phase(phase, rest, c, args.workers)
        save(result, args.out)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    t_begin = time.monotonic()
    os.makedirs(args.out, exist_ok=True)
    work = tempfile.mkdtemp(prefix="kb-build-times-", dir=args.work)
    kernels = kernel_sources(args.kernels, args.limit + 1)
    if len(kernels) < 2:
        print("need at least two kernels that build", file=sys.stderr)
        return 2
    base, cfg = phase_configs(args, work)
    result = new_result(args, base, kernels)
    if args.device == "cuda":
        result["nvcc_probe"] = nvcc_probe()
        print(
            f"0. nvcc --dryrun: host compile of cudafe++'s output: "
            f"{result['nvcc_probe'].get('host_input_is_cudafe_output')}",
            flush=True,
        )
    first_name, first = kernels[0]
    rest = kernels[1:]
    alone_before_phase(first_name, first, cfg, result)
    save(result, args.out)
    headers_phase(cfg, result)
    save(result, args.out)
    warm_phases(first_name, first, cfg, result)
    save(result, args.out)
    pool_phases(args, t_begin, rest, cfg, result)
    shutil.rmtree(work, ignore_errors=True)
    save(result, args.out)
    print(f"wrote {os.path.join(args.out, 'build_times.json')} ({time.monotonic() - t_begin:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
