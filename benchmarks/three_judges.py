#!/usr/bin/env python3
"""Three judges of the same kernels on one GPU: our library, KernelBench's own harness, the profiler.

    python3 benchmarks/three_judges.py CORPUS --kb-src DIR --out OUT.jsonl [--subset FILE]
        [--stop-after SECONDS] [--gpu-after FILE] [--build-workers N]
    python3 benchmarks/three_judges.py --figures OUT.jsonl      # the figures of a finished run

CORPUS is what ``benchmarks/kernel_corpus.py`` lays out (``problems/`` and ``kernels/``); DIR holds
KernelBench's ``kernelbench`` package (``src/`` of a KernelBench checkout), used unchanged except
that its fp32 tolerance is set to the rules the kernel was written under (1e-2 for KernelBench v0
problems, its own 1e-4 for problems of its current main) and missing LLM-client modules it imports
but never calls here (dotenv, openai, litellm, pydantic) are stubbed.

For each kernel, one after another on the GPU (never two things on it at once):
1. **ours**: ``evaluation.evaluate`` with the library's defaults (fresh inputs per call, alternating
   rounds, two reference processes, median, adaptive stop), its processes pinned to one core;
2. **KernelBench**: ``eval_kernel_against_ref`` (5 correctness trials, 100 timed trials, CUDA events,
   L2 flushed per trial, mean) in a fresh process pinned to the same core, built ahead of time with
   KernelBench's own ``build_compile_cache`` into a per-kernel folder;
3. **the profiler**, in that same process, on the very model objects and input tensors KernelBench
   timed: each forward under ``torch.profiler`` (CUPTI) after KernelBench's L2 flush; per forward
   the sum of the GPU activities it launched ("work": kernels, copies, memsets) and their extent
   ("span", first start to last end), medians over the calls; plus a CUDA-event median on the same
   objects (KernelBench's method, median instead of mean).
Builds (ours in the library's build pool, KernelBench's in its own processes) run on the other cores
ahead of the GPU. One JSON line per kernel; a summary at the end (also ``--figures``).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from evaluation.results.stats import median  # noqa: E402 - the repository root is put on the path first

#: fp32 tolerance of the rules each problem source was published under (docs/evaluation.md,
#: "Scoring rules per KernelBench version").
TOLERANCE_BY_PROBLEM_REPO = {"anneouyang/KernelBenchLeaderboard": 1e-2, "ScalingIntelligence/KernelBench": 1e-4}
#: A kernel is "GPU-bound" when the GPU is busy at least this share of the event-timed call on both sides.
GPU_BOUND_BUSY = 0.9


# --------------------------------------------------------------------------------------- child --


def _stub_missing_modules() -> None:
    """KernelBench's package imports LLM clients at import time; they are never called here."""
    import types

    for name in ("dotenv", "openai", "litellm", "tqdm", "requests"):
        try:
            __import__(name)
        except ImportError:
            mod = types.ModuleType(name)
            mod.load_dotenv = lambda *a, **k: None  # type: ignore[attr-defined]
            mod.OpenAI = object  # type: ignore[attr-defined]
            mod.completion = None  # type: ignore[attr-defined]
            mod.tqdm = lambda it=None, *a, **k: it  # type: ignore[attr-defined]
            sys.modules[name] = mod
    try:
        import pydantic  # noqa: F401
    except ImportError:
        mod = types.ModuleType("pydantic")

        class BaseModel:  # the fields KernelExecResult declares, with their class defaults
            def __init__(self, **kw: Any) -> None:
                for k, v in kw.items():
                    setattr(self, k, v)

        mod.BaseModel = BaseModel  # type: ignore[attr-defined]
        sys.modules["pydantic"] = mod


def _gpu_activities(trace_path: str, prefix: str) -> list[tuple[float, float, int, int]]:
    """(work µs, span µs, activities, of them launched from inside the range) per annotated forward,
    from a Chrome trace torch.profiler wrote. A forward's GPU activities are those that start after
    its annotation began and end before the device synchronisation that follows it returns (the L2
    flush of the next call is enqueued only after that); the correlation ids of the runtime and
    driver calls made inside the annotation cross-check the count."""
    with open(trace_path, encoding="utf-8") as fh:
        events = json.load(fh)["traceEvents"]
    ranges = sorted(
        (e["ts"], e["ts"] + e["dur"])
        for e in events
        if e.get("cat") == "user_annotation" and str(e.get("name", "")).startswith(prefix)
    )
    calls = [e for e in events if e.get("cat") in ("cuda_runtime", "cuda_driver")]
    syncs = sorted((e["ts"], e["ts"] + e.get("dur", 0)) for e in calls if "Synchronize" in str(e.get("name")))
    acts = [e for e in events if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    out = []
    for t0, t1 in ranges:
        end = next((b for a, b in syncs if a >= t1 - 1), math.inf)
        mine = [
            (e["ts"], e["ts"] + e["dur"], e.get("args", {}).get("correlation"))
            for e in acts
            if e["ts"] >= t0 and e["ts"] + e["dur"] <= end
        ]
        launched = {c.get("args", {}).get("correlation") for c in calls if t0 <= c["ts"] <= t1}
        if not mine:
            out.append((0.0, 0.0, 0, 0))
            continue
        out.append(
            (
                sum(b - a for a, b, _ in mine),
                max(b for _, b, _ in mine) - min(a for a, _, _ in mine),
                len(mine),
                sum(c in launched for _, _, c in mine),
            )
        )
    return out


def _median(xs: list[float]) -> float:
    """evaluation.results.stats.median, NaN for no values (a forward the trace saw nothing of)."""
    return median(xs) if xs else math.nan


def _profile_side(
    torch: Any, kbt: Any, fn: Any, args: list[Any], calls: int, trace_dir: str, tag: str
) -> dict[str, Any]:
    from torch.profiler import ProfilerActivity, profile, record_function

    dev = torch.cuda.current_device()
    with torch.no_grad():
        for _ in range(3):
            fn(*args)
        torch.cuda.synchronize()
        ev0, ev1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        event_ms = []
        for _ in range(calls):
            kbt.clear_l2_cache(device=dev)
            torch.cuda.synchronize()
            ev0.record()
            fn(*args)
            ev1.record()
            torch.cuda.synchronize()
            event_ms.append(ev0.elapsed_time(ev1))
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for i in range(calls):
                kbt.clear_l2_cache(device=dev)
                torch.cuda.synchronize()
                with record_function(f"judge_fwd_{i}"):
                    fn(*args)
                torch.cuda.synchronize()
    path = os.path.join(trace_dir, f"{tag}.json")
    prof.export_chrome_trace(path)
    acts = _gpu_activities(path, "judge_fwd_")
    os.unlink(path)
    return {
        "work_ms": _median([a[0] for a in acts]) / 1e3,
        "span_ms": _median([a[1] for a in acts]) / 1e3,
        "activities": _median([float(a[2]) for a in acts]),
        "correlated": _median([float(a[3]) for a in acts]),
        "event_median_ms": _median(event_ms),
        "event_mean_ms": sum(event_ms) / len(event_ms),
        "calls": len(acts),
    }


def _capture_timings(kbt: Any) -> list[tuple[Any, list[Any], list[float]]]:
    """Wrap KernelBench's timing function so that each call's (model, inputs, times) is kept, in the
    order it timed them (the kernel first, then the reference); returns the list it fills."""
    captured: list[tuple[Any, list[Any], list[float]]] = []
    original = kbt.get_timing_function

    def capturing(method: str) -> Any:
        fn = original(method)

        def timed(kernel_fn: Any, inputs: list[Any], **kw: Any) -> list[float]:
            times = fn(kernel_fn, inputs, **kw)
            captured.append((kernel_fn, inputs, list(times)))
            return times

        return timed

    kbt.get_timing_function = capturing
    return captured


def _kb_figures(r: Any, captured: list[tuple[Any, list[Any], list[float]]]) -> dict[str, Any]:
    """KernelBench's verdict and times, with the mean and median of the raw times it captured."""
    meta = {k: str(v)[:300] for k, v in (getattr(r, "metadata", None) or {}).items()}
    kb: dict[str, Any] = {
        "compiled": r.compiled,
        "correct": r.correctness,
        "metadata": meta,
        "kernel_mean_ms": r.runtime,
        "ref_mean_ms": getattr(r, "ref_runtime", -1.0),
    }
    if len(captured) >= 2:
        k_times, r_times = captured[0][2], captured[1][2]
        kb.update(
            kernel_raw_mean_ms=sum(k_times) / len(k_times),
            ref_raw_mean_ms=sum(r_times) / len(r_times),
            kernel_median_ms=_median(k_times),
            ref_median_ms=_median(r_times),
        )
        kb["speedup"] = kb["ref_mean_ms"] / kb["kernel_mean_ms"] if kb["kernel_mean_ms"] > 0 else None
        kb["speedup_median"] = kb["ref_median_ms"] / kb["kernel_median_ms"]
    return kb


def _run_kernelbench(
    kbe: Any,
    args: argparse.Namespace,
    ref_src: str,
    ker_src: str,
    captured: list[tuple[Any, list[Any], list[float]]],
    out: dict[str, Any],
) -> None:
    """KernelBench's ``eval_kernel_against_ref`` on the pair; sets ``out["kb"]``."""
    try:
        r = kbe.eval_kernel_against_ref(
            ref_src,
            ker_src,
            seed_num=42,
            num_correct_trials=5,
            num_perf_trials=args.kb_trials,
            measure_performance=True,
            timing_method="cuda_event",
            build_dir=args.build_dir,
            device=0,
            backend=args.backend,
        )
    except Exception as exc:  # noqa: BLE001 - KernelBench's harness crashing is a finding
        out["kb"] = {"error": f"{type(exc).__name__}: {exc}"[:400]}
        r = None
    if r is None and "kb" not in out:
        out["kb"] = {"error": "eval_kernel_against_ref returned None (lock error)"}
    elif r is not None:
        out["kb"] = _kb_figures(r, captured)


def _profile_both(
    torch: Any, kbt: Any, captured: list[tuple[Any, list[Any], list[float]]], args: argparse.Namespace
) -> dict[str, Any]:
    """The profiler on the kernel and the reference KernelBench timed, and the speedups it gives."""
    ker = _profile_side(torch, kbt, captured[0][0], captured[0][1], args.profiler_calls, args.trace_dir, "ker")
    ref = _profile_side(torch, kbt, captured[1][0], captured[1][1], args.profiler_calls, args.trace_dir, "ref")
    return {
        "kernel": ker,
        "reference": ref,
        "speedup_work": ref["work_ms"] / ker["work_ms"] if ker["work_ms"] > 0 else None,
        "speedup_span": ref["span_ms"] / ker["span_ms"] if ker["span_ms"] > 0 else None,
        "speedup_event_median": ref["event_median_ms"] / ker["event_median_ms"],
    }


def child(args: argparse.Namespace) -> None:
    """KernelBench's harness, then the profiler on the objects it timed; prints one JSON line."""
    _stub_missing_modules()
    sys.path.insert(0, args.kb_src)
    import kernelbench.eval as kbe
    import torch
    from kernelbench import timing as kbt

    tol = float(args.tolerance)
    kbe.get_tolerance_for_precision = lambda precision: tol  # the kernel's own rules (see the docstring)
    captured = _capture_timings(kbt)
    with open(args.problem, encoding="utf-8") as fh:
        ref_src = fh.read()
    with open(args.kernel, encoding="utf-8") as fh:
        ker_src = fh.read()
    out: dict[str, Any] = {}
    t0 = time.monotonic()
    _run_kernelbench(kbe, args, ref_src, ker_src, captured, out)
    out["kb_wall_s"] = round(time.monotonic() - t0, 2)
    if len(captured) >= 2:
        t1 = time.monotonic()
        try:
            out["prof"] = _profile_both(torch, kbt, captured, args)
        except Exception as exc:  # noqa: BLE001
            out["prof"] = {"error": f"{type(exc).__name__}: {exc}"[:400]}
        out["prof_wall_s"] = round(time.monotonic() - t1, 2)
    print("JUDGE " + json.dumps(out, default=str), flush=True)


# ---------------------------------------------------------------------------------------- host --


def kb_prebuild(python: str, kb_src: str, kernel_path: str, build_dir: str, env: dict[str, str]) -> dict[str, Any]:
    """KernelBench's own pre-compile (``build_compile_cache``) into ``build_dir``, in its own process."""
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); sys.argv.pop(1); "
        "import three_judges as tj; tj._stub_missing_modules(); sys.path.insert(0, sys.argv[1]); "
        "from kernelbench.eval import build_compile_cache; "
        "ok, log, err = build_compile_cache(open(sys.argv[2]).read(), build_dir=sys.argv[3]); "
        "print('BUILT' if ok else 'FAILED', (err or '')[:300])"
    )
    t0 = time.monotonic()
    p = subprocess.run(
        [python, "-c", code, HERE, kb_src, kernel_path, build_dir], capture_output=True, text=True, env=env, timeout=900
    )
    last = (p.stdout.strip().splitlines() or [""])[-1]
    return {"ok": last.startswith("BUILT"), "seconds": round(time.monotonic() - t0, 1), "message": last[:300]}


def run_judge_child(
    task: Any, backend: str, tol: float, build_dir: str, args: argparse.Namespace, core: int | None, env: dict[str, str]
) -> dict[str, Any]:
    cmd = [
        sys.executable,
        os.path.abspath(__file__),
        "--child",
        "--problem",
        task.problem_path,
        "--kernel",
        task.kernel_path,
        "--backend",
        backend,
        "--tolerance",
        str(tol),
        "--build-dir",
        build_dir,
        "--kb-src",
        args.kb_src,
        "--kb-trials",
        str(args.kb_trials),
        "--profiler-calls",
        str(args.profiler_calls),
        "--trace-dir",
        args.trace_dir,
    ]
    pin = (lambda: os.sched_setaffinity(0, {core})) if core is not None else None
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=args.child_timeout, env=env, preexec_fn=pin)
    except subprocess.TimeoutExpired:
        return {"kb": {"error": f"timed out after {args.child_timeout} s"}}
    lines = [ln[6:] for ln in p.stdout.splitlines() if ln.startswith("JUDGE ")]
    if not lines:
        return {"kb": {"error": f"exit {p.returncode}: {(p.stderr or p.stdout)[-400:]}"}}
    return json.loads(lines[-1])


def ours_summary(r: dict[str, Any]) -> dict[str, Any]:
    keep = ("status", "speedup", "speedup_interval", "error", "max_abs_diff", "build_cached")
    out = {k: r.get(k) for k in keep}
    for side in ("kernel_ms", "reference_ms"):
        d = r.get(side) or {}
        out[side] = {
            k: d.get(k)
            for k in ("median", "mean", "std", "calls_per_round", "trials", "process_ratio", "unaccounted_ms")
            if k in d
        }
    out["rounds"] = (r.get("environment") or {}).get("timing_rounds")
    out["flags"] = [f["code"] for f in r.get("flags") or []]
    out["timings_s"] = r.get("timings_s")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("corpus", nargs="?")
    ap.add_argument("--kb-src")
    ap.add_argument("--out")
    ap.add_argument("--subset", help="file of level<L>/<problem> lines: only these, in this order")
    ap.add_argument("--device", default="cuda", help="cpu: a dry run of the loop (every judge fails)")
    ap.add_argument("--start", type=int, default=0, help="skip the first N kernels (of the subset)")
    ap.add_argument("--stop-after", type=float, default=1e9, help="start no kernel after this many seconds")
    ap.add_argument("--gpu-after", help="wait for this file to exist before the first GPU work")
    ap.add_argument("--build-workers", type=int, default=5, help="per builder (ours and KernelBench's)")
    ap.add_argument("--kb-trials", type=int, default=100)
    ap.add_argument("--profiler-calls", type=int, default=20)
    ap.add_argument("--child-timeout", type=float, default=180)
    ap.add_argument("--trace-dir", default="/tmp")
    ap.add_argument("--figures")
    ap.add_argument("--child", action="store_true")
    ap.add_argument("--problem")
    ap.add_argument("--kernel")
    ap.add_argument("--backend", default="cuda")
    ap.add_argument("--tolerance", default="1e-4")
    ap.add_argument("--build-dir")
    args = ap.parse_args(argv)
    if args.child:
        child(args)
        return 0
    if args.figures:
        rows = [json.loads(ln) for ln in open(args.figures, encoding="utf-8") if ln.strip()]
        print(format_figures(figures(rows)))
        return 0
    return host(args)


def host(args: argparse.Namespace) -> int:
    import dataclasses

    from kernel_corpus import load_manifest

    from evaluation import EvaluationConfig
    from evaluation.builds.stage import target_arch
    from evaluation.runner import prepare

    t_start = time.monotonic()
    manifest = {(int(m["level"]), str(m["problem"])): m for m in load_manifest()}
    tasks = _select_tasks(args)
    timing_core, main_cores, build_cores = _split_cores()
    base = EvaluationConfig(device=args.device, seed=42, cpus=(timing_core,) if timing_core is not None else ())
    base = dataclasses.replace(base, cuda_arch=target_arch(base) or None)
    env = dict(os.environ, TORCH_CUDA_ARCH_LIST=base.cuda_arch or "", TORCH_USE_CUDA_DSA="1", MAX_JOBS="2")
    build_root = os.path.join(args.trace_dir, "kb-judge-builds")

    def cfg_for(t: Any) -> tuple[EvaluationConfig, float, str]:
        m = manifest.get((t.level, t.problem), {})
        tol = TOLERANCE_BY_PROBLEM_REPO.get(str(m.get("problem_repository")), 1e-4)
        return dataclasses.replace(base, atol=tol, rtol=tol), tol, str(m.get("backend", "cuda"))

    sources = {id(t): open(t.kernel_path, encoding="utf-8").read() for t in tasks}
    ours_pool, kb_pool, ours_builds, kb_builds = _queue_builds(
        args,
        tasks=tasks,
        sources=sources,
        base=base,
        build_cores=build_cores,
        cfg_for=cfg_for,
        env=env,
        build_root=build_root,
    )
    _wait_for_gpu(args, main_cores, tasks, ours_builds, kb_builds, t_start)

    def start(t: Any) -> Any:  # our evaluation's processes import torch while the GPU does other work
        return prepare(open(t.problem_path, encoding="utf-8").read(), sources[id(t)], cfg_for(t)[0])

    rows = _judge_all(
        args,
        tasks=tasks,
        t_start=t_start,
        start=start,
        cfg_for=cfg_for,
        ours_builds=ours_builds,
        kb_builds=kb_builds,
        manifest=manifest,
        build_root=build_root,
        timing_core=timing_core,
        env=env,
    )
    print(format_figures(figures(rows)), flush=True)
    ours_pool.close(wait=False)
    kb_pool.shutdown(wait=False, cancel_futures=True)
    # Builds still running for kernels never reached would hold the interpreter's exit (it joins the
    # pools' threads): end now; their processes die with the machine or finish on their own.
    sys.stdout.flush()
    os._exit(0)


def _select_tasks(args: argparse.Namespace) -> list[Any]:
    """The corpus's kernels: those of ``--subset`` in its order, if given, less the first ``--start``."""
    # deferred, as host()'s own imports are: only a run of the judges uses it
    from evaluation.sweep import find_tasks

    tasks = find_tasks(os.path.join(args.corpus, "problems"), [1, 2, 3], os.path.join(args.corpus, "kernels"))
    if args.subset:
        order = [ln.strip() for ln in open(args.subset, encoding="utf-8") if ln.strip() and not ln.startswith("#")]
        by_name = {f"level{t.level}/{t.problem}": t for t in tasks}
        tasks = [by_name[n] for n in order if n in by_name]
    tasks = tasks[args.start :]
    return tasks


def _wait_for_gpu(
    args: argparse.Namespace,
    main_cores: list[int],
    tasks: list[Any],
    ours_builds: dict[int, Future[Any]],
    kb_builds: dict[int, Future[Any]],
    t_start: float,
) -> None:
    """Leave the build cores to the builds, wait for ``--gpu-after``'s file if given, and say so."""
    os.sched_setaffinity(0, main_cores)
    if args.gpu_after:
        while not os.path.exists(args.gpu_after):
            time.sleep(1)
    print(
        f"judges: {len(tasks)} kernels; builds queued: {len(ours_builds)} ours, {len(kb_builds)} KernelBench's; "
        f"GPU work starts at {time.monotonic() - t_start:.0f} s",
        flush=True,
    )


def _split_cores() -> tuple[int | None, list[int], list[int]]:
    """(the timing core or None, the cores that start evaluations, the build cores) of this process."""
    cores = sorted(os.sched_getaffinity(0))
    # The last core times (every timed process, ours and KernelBench's, in turn); the three before it
    # start the next evaluation's processes; builds get the rest but core 0, which is left to a
    # sweep's timing core when one runs beside the builds (--gpu-after).
    big = len(cores) >= 8
    timing_core = cores[-1] if big else None
    main_cores = cores[-4:-1] if big else cores
    build_cores = cores[1:-4] if big else cores
    return timing_core, main_cores, build_cores


def _queue_builds(
    args: argparse.Namespace,
    *,
    tasks: list[Any],
    sources: dict[int, str],
    base: Any,
    build_cores: list[int],
    cfg_for: Callable[[Any], tuple[Any, float, str]],
    env: dict[str, str],
    build_root: str,
) -> tuple[Any, ThreadPoolExecutor, dict[int, Future[Any]], dict[int, Future[Any]]]:
    """Both builders' pools, each CUDA kernel that needs a build queued on both, on the build cores:
    (our pool, KernelBench's pool, our builds, KernelBench's builds), builds by ``id`` of the task."""
    # deferred, as host()'s own imports are: only a run of the judges uses them
    from evaluation.builds.entry import needs_build
    from evaluation.builds.stage import BuildPool

    ours_pool = BuildPool(args.build_workers, base, build_cores)
    kb_pool = ThreadPoolExecutor(max_workers=args.build_workers)
    os.sched_setaffinity(0, build_cores)  # KernelBench's build processes inherit this
    ours_builds: dict[int, Future[Any]] = {}
    kb_builds: dict[int, Future[Any]] = {}
    for t in tasks:
        cfg, _, backend = cfg_for(t)
        if backend == "cuda" and needs_build(sources[id(t)]):
            ours_builds[id(t)] = ours_pool.submit(sources[id(t)], cfg)
            kb_builds[id(t)] = kb_pool.submit(
                kb_prebuild,
                sys.executable,
                args.kb_src,
                t.kernel_path,
                os.path.join(build_root, f"level{t.level}_{t.problem}"),
                env,
            )
    return ours_pool, kb_pool, ours_builds, kb_builds


def _finished_builds(t: Any, ours_builds: dict[int, Future[Any]], kb_builds: dict[int, Future[Any]]) -> dict[str, Any]:
    """Both builders' outcomes for the kernel, once they are done (None where it needs no build)."""
    return {
        "ours": ours_builds[id(t)].result().to_dict() if id(t) in ours_builds else None,
        "kb": kb_builds[id(t)].result() if id(t) in kb_builds else None,
    }


def _judge_all(
    args: argparse.Namespace,
    *,
    tasks: list[Any],
    t_start: float,
    start: Callable[[Any], Any],
    cfg_for: Callable[[Any], tuple[Any, float, str]],
    ours_builds: dict[int, Future[Any]],
    kb_builds: dict[int, Future[Any]],
    manifest: dict[tuple[int, str], Any],
    build_root: str,
    timing_core: int | None,
    env: dict[str, str],
) -> list[dict[str, Any]]:
    """Each kernel in turn on the GPU (ours, then KernelBench's child), the next one's evaluation
    started in between; one JSON line per kernel to ``args.out``. Returns the rows."""
    # deferred, as host()'s own imports are: only a run of the judges uses it
    from evaluation.runner import evaluate_prepared

    rows = []
    nxt = start(tasks[0]) if tasks else None
    with open(args.out, "w", encoding="utf-8") as fh:
        for i, t in enumerate(tasks):
            if time.monotonic() - t_start > args.stop_after:
                print(f"judges: stopped before {len(tasks) - i} kernel(s) (--stop-after)", flush=True)
                if nxt is not None:
                    nxt.sandbox.close()
                break
            cfg, tol, backend = cfg_for(t)
            prep, nxt = nxt, None
            t0 = time.monotonic()
            prebuild = _finished_builds(t, ours_builds, kb_builds)
            waited = time.monotonic() - t0
            t1 = time.monotonic()
            ours = ours_summary(evaluate_prepared(prep).to_dict())
            ours_wall = time.monotonic() - t1
            nxt = start(tasks[i + 1]) if i + 1 < len(tasks) else None
            judged = run_judge_child(
                t, backend, tol, os.path.join(build_root, f"level{t.level}_{t.problem}"), args, timing_core, env
            )
            row = {
                "level": t.level,
                "problem": t.problem,
                "backend": backend,
                "tolerance": tol,
                "model": manifest.get((t.level, t.problem), {}).get("model"),
                "ours": ours,
                **judged,
                "prebuild": prebuild,
                "build_wait_s": round(waited, 1),
                "ours_wall_s": round(ours_wall, 1),
            }
            rows.append(row)
            fh.write(json.dumps(row, default=str) + "\n")
            fh.flush()
            print(one_line(row), flush=True)
    return rows


# ------------------------------------------------------------------------------------- figures --


def _f(x: Any, spec: str = ".3f") -> str:
    return "-" if x is None or (isinstance(x, float) and not math.isfinite(x)) else format(x, spec)


def judged(row: dict[str, Any]) -> dict[str, float | None]:
    """The speedups each judge gave (None where it gave none)."""
    ours = row.get("ours") or {}
    kb = row.get("kb") or {}
    prof = row.get("prof") or {}
    return {
        "ours": ours.get("speedup") if ours.get("status") == "correct" else None,
        "kb": kb.get("speedup") if kb.get("correct") else None,
        "kb_median": kb.get("speedup_median") if kb.get("correct") else None,
        "prof_work": prof.get("speedup_work"),
        "prof_span": prof.get("speedup_span"),
        "prof_event_median": prof.get("speedup_event_median"),
    }


def gpu_bound(row: dict[str, Any]) -> bool | None:
    prof = row.get("prof") or {}
    sides = [prof.get("kernel"), prof.get("reference")]
    if not all(isinstance(s, dict) and s.get("event_median_ms") for s in sides):
        return None
    return all(s["work_ms"] / s["event_median_ms"] >= GPU_BOUND_BUSY for s in sides)  # type: ignore[index]


def one_line(row: dict[str, Any]) -> str:
    j = judged(row)
    ours = row.get("ours") or {}
    kb = row.get("kb") or {}
    tail = "" if j["ours"] else f" ours: {ours.get('status')} {str(ours.get('error') or '')[:60]}"
    tail += (
        ""
        if j["kb"]
        else f" kb: {str(kb.get('error') or kb.get('metadata', {}).get('correctness_issue') or 'incorrect')[:60]}"
    )
    return (
        f"level{row['level']}/{row['problem'][:38]:38s} ours {_f(j['ours'])} kb {_f(j['kb'])} "
        f"(median {_f(j['kb_median'])}) prof work {_f(j['prof_work'])} span {_f(j['prof_span'])} "
        f"gpu-bound {gpu_bound(row)}{tail}"
    )


def _ratio_stats(pairs: list[tuple[float, float]]) -> dict[str, Any]:
    devs = sorted(abs(a / b - 1.0) for a, b in pairs if a and b)
    if not devs:
        return {"n": 0}
    p95 = devs[min(len(devs) - 1, max(0, math.ceil(0.95 * len(devs)) - 1))]
    return {
        "n": len(devs),
        "median": _median(devs),
        "p95": p95,
        "over_5pct": sum(d > 0.05 for d in devs),
        "within_3pct": sum(d <= 0.03 for d in devs),
    }


def figures(rows: list[dict[str, Any]]) -> dict[str, Any]:
    js = [(r, judged(r)) for r in rows]
    out: dict[str, Any] = {"kernels": len(rows)}
    for other in ("kb", "kb_median", "prof_work", "prof_span", "prof_event_median"):
        pairs = [(j["ours"], j[other]) for _, j in js if j["ours"] and j[other]]
        out[f"ours_vs_{other}"] = _ratio_stats(pairs)
    bound = [(j["ours"], j["prof_work"]) for r, j in js if j["ours"] and j["prof_work"] and gpu_bound(r)]
    out["ours_vs_prof_work_gpu_bound"] = _ratio_stats(bound)
    out["kb_vs_prof_work"] = _ratio_stats([(j["kb"], j["prof_work"]) for _, j in js if j["kb"] and j["prof_work"]])
    out["verdicts"] = {
        "both_correct": sum(bool(j["ours"] and j["kb"]) for _, j in js),
        "ours_only": sum(bool(j["ours"] and not j["kb"]) for _, j in js),
        "kb_only": sum(bool(j["kb"] and not j["ours"]) for _, j in js),
        "neither": sum(not j["ours"] and not j["kb"] for _, j in js),
    }
    out["over_5pct"] = [
        {"kernel": f"level{r['level']}/{r['problem']}", **{k: v for k, v in j.items() if v}, "gpu_bound": gpu_bound(r)}
        for r, j in js
        if j["ours"] and any(j[o] and abs(j["ours"] / j[o] - 1) > 0.05 for o in ("kb", "prof_work"))
    ]
    return out


def format_figures(f: dict[str, Any]) -> str:
    lines = [f"kernels: {f['kernels']}; verdicts {f['verdicts']}"]
    for key in (
        "ours_vs_kb",
        "ours_vs_kb_median",
        "ours_vs_prof_work",
        "ours_vs_prof_work_gpu_bound",
        "ours_vs_prof_span",
        "ours_vs_prof_event_median",
        "kb_vs_prof_work",
    ):
        s = f[key]
        if s.get("n"):
            lines.append(
                f"{key}: n={s['n']} |ratio-1| median {s['median']:.2%}, p95 {s['p95']:.2%}, "
                f"{s['within_3pct']} within 3%, {s['over_5pct']} over 5%"
            )
    for o in f["over_5pct"]:
        lines.append("  over 5%: " + json.dumps(o))
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
