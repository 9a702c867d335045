"""``python -m evaluation sweep``: evaluate a whole KernelBench checkout, spread over the GPUs.

Every problem of the chosen levels is evaluated against itself (its ``Model`` renamed ``ModelNew``),
or against the kernels of a folder. One worker process per GPU (``CUDA_VISIBLE_DEVICES`` set per
worker) takes problems from a shared queue, one evaluation at a time, and starts the sandboxes
of its next evaluation while the current one runs (evaluation.runner.prepare). Meanwhile a pool of
CPU build processes in the parent (evaluation.builds.stage.BuildPool) compiles the kernels in queue
order, ahead of the GPUs, so that a GPU worker finds its kernel built and only loads it. The parent
shows progress, writes one JSON line per evaluation and ends with a summary.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import glob
import json
import math
import multiprocessing as mp
import os
import queue as queue_mod
import re
import signal
import sys
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, TextIO

from evaluation.builds.entry import needs_build
from evaluation.builds.pool import Placement, place
from evaluation.builds.stage import BuildOutcome, BuildPool, target_arch
from evaluation.results.metrics import fast_p
from evaluation.results.stats import median
from evaluation.results.types import EvaluationConfig
from evaluation.runner import Prepared, evaluate_prepared, prepare
from evaluation.sandbox import limits

_NUMBERED = re.compile(r"^(\d+)_")
#: Evaluations whose sandboxes a worker keeps started ahead (their processes import torch meanwhile).
PREPARE_AHEAD = 2


@dataclass
class Task:
    level: int
    problem: str  # file name without .py, e.g. "19_ReLU"
    problem_path: str
    kernel_path: str | None = None  # None: the problem against itself


@dataclass
class Outcome:
    task: Task
    gpu: str
    result: dict[str, Any] = field(default_factory=dict)


def self_kernel(problem_source: str) -> str:
    """The problem as its own kernel: every ``Model`` name becomes ``ModelNew`` (``super(Model, self)`` too)."""
    return re.sub(r"\bModel\b", "ModelNew", problem_source)


def _number(name: str) -> int:
    m = _NUMBERED.match(name)
    return int(m.group(1)) if m else 10**9


def _kernel_for(kernels_dir: str, level: int, problem: str) -> str | None:
    """``DIR/level<L>/<problem>.py``, else KernelBench's ``level_<L>_problem_<P>_sample_0_kernel.py``."""
    candidates = [os.path.join(kernels_dir, f"level{level}", f"{problem}.py"),
                  os.path.join(kernels_dir, f"level_{level}_problem_{_number(problem)}_sample_0_kernel.py")]
    return next((c for c in candidates if os.path.isfile(c)), None)


def find_tasks(kb_dir: str, levels: list[int], kernels_dir: str | None = None,
               patterns: tuple[str, ...] | list[str] = ("*",)) -> list[Task]:
    """Problems of ``levels`` under ``kb_dir`` (the checkout, or its ``KernelBench/`` folder), in order."""
    base = os.path.join(kb_dir, "KernelBench") if os.path.isdir(os.path.join(kb_dir, "KernelBench")) else kb_dir
    tasks = []
    for level in levels:
        paths = glob.glob(os.path.join(base, f"level{level}", "*.py"))
        for path in sorted(paths, key=lambda p: (_number(os.path.basename(p)), p)):
            name = os.path.basename(path)[:-3]
            if not any(fnmatch.fnmatch(name, p) or fnmatch.fnmatch(f"level{level}/{name}", p) for p in patterns):
                continue
            kernel = _kernel_for(kernels_dir, level, name) if kernels_dir else None
            if kernels_dir and kernel is None:
                continue
            tasks.append(Task(level, name, path, kernel))
    return tasks


def _read(path: str) -> str:
    with open(path, encoding="utf-8") as fh:
        return fh.read()


def _sources(task: Task) -> tuple[str, str]:
    problem = _read(task.problem_path)
    return problem, _read(task.kernel_path) if task.kernel_path else self_kernel(problem)


def _slim(d: dict[str, Any]) -> dict[str, Any]:
    """The result without its log and per-round samples (keeps the JSONL small)."""
    d = dict(d)
    d.pop("log", None)
    for side in ("kernel_ms", "reference_ms"):
        if isinstance(d.get(side), dict):
            d[side] = {k: v for k, v in d[side].items() if k != "samples"}
    return d


def _worker(gpu: str, timing: list[int], others: list[int], cfg: EvaluationConfig, tasks: Any,
            results: Any) -> None:
    """One GPU: take tasks until the queue yields None; prepare the next while evaluating the current."""
    if gpu != "cpu":
        os.environ["CUDA_VISIBLE_DEVICES"] = gpu
    if timing:
        # The sandboxed processes being timed share its timing core (cfg.cpus, the same for every
        # evaluation); this worker and the processes it starts ahead run on the rest of its slice,
        # less the timing cores' SMT siblings (evaluation.builds.pool.place).
        if others:
            os.sched_setaffinity(0, others)
        cfg = dataclasses.replace(cfg, cpus=tuple(timing))
    signal.signal(signal.SIGINT, _stopped)
    signal.signal(signal.SIGTERM, _stopped)
    ahead: deque[tuple[Task, Prepared | None]] = deque()
    try:
        _evaluate_in_turn(gpu, cfg, tasks, results, ahead)
    finally:
        _close_ahead(ahead)


def _evaluate_in_turn(gpu: str, cfg: EvaluationConfig, tasks: Any, results: Any,
                      ahead: deque[tuple[Task, Prepared | None]]) -> None:
    more = True
    while True:
        while more and len(ahead) < PREPARE_AHEAD:
            nxt = tasks.get()
            more = nxt is not None
            if nxt is not None:
                ahead.append((nxt, _prepare(nxt, cfg)))
        if not ahead:
            return
        # The running evaluation stays first in `ahead` until it ends: a stop that cuts its own close
        # short (an interrupt lands anywhere) leaves it to _close_ahead, which closes it again.
        task, prep = ahead[0]
        try:
            if prep is None:
                raise RuntimeError("the sandbox could not be prepared")
            results.put(Outcome(task, gpu, _slim(evaluate_prepared(prep).to_dict())))
        except Exception as exc:  # noqa: BLE001 - report and go on with the next problem
            results.put(Outcome(task, gpu, {"status": "harness_error", "error": f"{type(exc).__name__}: {exc}"}))
        ahead.popleft()


def _close_ahead(ahead: deque[tuple[Task, Prepared | None]]) -> None:
    """The sandboxes of a stopped worker: the running evaluation's (closed again: closing is
    idempotent) and those started ahead. Their processes live in their own sessions, which an
    interrupt of the sweep does not reach, and would otherwise hold the GPU's memory into whatever
    runs next on it."""
    while ahead:
        _task, prep = ahead.popleft()
        if prep is not None:
            prep.close()


def _prepare(task: Task, cfg: EvaluationConfig) -> Prepared | None:
    try:
        return prepare(*_sources(task), cfg)
    except Exception:  # noqa: BLE001 - reported when its turn comes
        return None


def visible_gpus(spec: str) -> list[str]:
    """``all`` or a count -> the first GPUs this process may use (``evaluation.sandbox.limits.visible_gpus``)."""
    ids = limits.visible_gpus()
    return ids if spec == "all" else ids[:max(1, int(spec))]


def _placement(n: int, pin: bool) -> Placement:
    """This process's CPUs split among ``n`` GPU workers and the builds (``pin`` False: not at all)."""
    cpus = sorted(os.sched_getaffinity(0))
    return place(cpus, n) if pin else Placement([], [[] for _ in range(n)], cpus)


def run_sweep(tasks: list[Task], cfg: EvaluationConfig, gpus: list[str], out: TextIO | None,
              progress: TextIO = sys.stderr, pin: bool = True, build_workers: int | None = None) -> dict[str, Any]:
    """Evaluate ``tasks`` over ``gpus`` (["cpu"] for the CPU), with ``build_workers`` build processes
    ahead of them (None: from the cores; 0: none, each evaluation builds its own); return the summary."""
    if cfg.device == "cuda" and not cfg.cuda_arch:  # found once here, not in every worker
        cfg = dataclasses.replace(cfg, cuda_arch=target_arch(cfg) or None)
    ctx = mp.get_context("spawn")
    queue: Any = ctx.Queue()
    results: Any = ctx.Queue()
    for t in tasks:
        queue.put(t)
    cores = _placement(len(gpus), pin and cfg.device == "cuda")
    timing = [[cores.timing[i]] if cores.timing else [] for i in range(len(gpus))]
    procs = [ctx.Process(target=_worker, args=(g, t, s, cfg, queue, results), daemon=True)
             for g, t, s in zip(gpus, timing, cores.slices, strict=True)]
    for _ in procs:
        queue.put(None)
    t0 = time.monotonic()
    for p in procs:
        p.start()
    pool = None
    try:
        pool, builds = _start_builds(tasks, cfg, build_workers, cores.builds)
        outcomes = _collect(results, procs, len(tasks), out, progress, builds)
    except KeyboardInterrupt:
        _stop_workers(procs)
        queue.cancel_join_thread()  # the tasks still queued: exiting must not wait to flush them
        raise
    finally:
        if pool is not None:
            pool.close(wait=False)
    for p in procs:
        p.join(timeout=60)
    summary = summarise(outcomes, (time.monotonic() - t0) / 60.0, len(gpus), pool.sizer.limit if pool else 0)
    if pool is not None:
        summary["build_pool"] = pool.sizer.describe()
    return summary


#: Seconds an interrupted sweep gives its GPU workers to close their sandboxes before it kills them:
#: a close kills a sandbox's processes and waits for them, seconds where a GPU context is torn down.
STOP_WAIT_S = 30.0


def _stop_workers(procs: list[Any]) -> None:
    """Stop each GPU worker still running (a Ctrl-C reaches the whole group, an interrupt of this
    process alone does not; a worker takes the first stop of either kind and ignores the rest) and
    wait for it to close the sandboxes it holds; kill what is left after STOP_WAIT_S."""
    deadline = time.monotonic() + STOP_WAIT_S
    for p in procs:
        if p.is_alive():
            p.terminate()
    for p in procs:
        p.join(timeout=max(0.0, deadline - time.monotonic()))
        if p.is_alive():
            p.kill()
            p.join(timeout=5)


def _stopped(signum: int, frame: Any) -> None:
    """A GPU worker's first SIGINT or SIGTERM: both ignored from now on, so that a second one (a
    Ctrl-C to the group, then the sweep's own stop) cannot cut the closing of its sandboxes short."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise KeyboardInterrupt


def _start_builds(tasks: list[Task], cfg: EvaluationConfig, workers: int | None,
                  cpus: list[int]) -> tuple[BuildPool | None, dict[tuple[int, str], Any]]:
    """Submit every kernel that compiles to a build pool, in queue order (the GPUs take them in the
    same order), and on the GPU every problem's sizes (``evaluation.phases.sizes_ahead``)."""
    read = [(t, *_sources(t)) for t in tasks]
    to_build = {(t.level, t.problem): kernel for t, _problem, kernel in read if t.kernel_path and needs_build(kernel)}
    if (not to_build and cfg.device != "cuda") or (workers is not None and workers <= 0):
        return None, {}
    # On ``cpus``: off the timing cores and every core sharing a physical core with one (SMT
    # siblings); as many builds at once as those cores and the memory hold at what builds use
    # (workers None).
    pool = BuildPool(workers, cfg, cpus)
    builds = {}
    for t, problem, _kernel in read:  # in queue order, each problem's sizes before its kernel's build
        if cfg.device == "cuda":
            pool.find_sizes(problem)
        key = (t.level, t.problem)
        if key in to_build and key not in builds:
            builds[key] = pool.submit(to_build[key])
    return pool, builds


def _collect(results: Any, procs: list[Any], n: int, out: TextIO | None, progress: TextIO,
             builds: dict[tuple[int, str], Any] | None = None) -> list[Outcome]:
    """Outcomes as they come; stops early (saying so) if every worker died with work left."""
    outcomes: list[Outcome] = []
    while len(outcomes) < n:
        try:
            o = results.get(timeout=10)
        except queue_mod.Empty:
            if not any(p.is_alive() for p in procs):
                progress.write(f"sweep: every worker stopped with {n - len(outcomes)} evaluation(s) left\n")
                break
            continue
        fut = (builds or {}).get((o.task.level, o.task.problem))
        if fut is not None and fut.done():
            built: BuildOutcome = fut.result()
            o.result["prebuild"] = built.to_dict()
        outcomes.append(o)
        _show(progress, len(outcomes), n, o)
        if out is not None:
            out.write(json.dumps(_record(o), default=str) + "\n")
            out.flush()
    return outcomes


def _record(o: Outcome) -> dict[str, Any]:
    return {"level": o.task.level, "problem": o.task.problem, "kernel": o.task.kernel_path or "self",
            "gpu": o.gpu, **o.result}


def _show(stream: TextIO, i: int, n: int, o: Outcome) -> None:
    r = o.result
    sp = r.get("speedup")
    ci = r.get("speedup_interval") or [math.nan, math.nan]
    figure = f"{sp:.3f}x [{ci[0]:.3f}-{ci[1]:.3f}]" if sp is not None else (r.get("error") or "")[:100]
    wall = (r.get("timings_s") or {}).get("total", math.nan)
    stream.write(f"[{i}/{n}] level{o.task.level}/{o.task.problem} {r.get('status')} {figure} "
                 f"{wall:.1f}s (gpu {o.gpu})\n")
    stream.flush()


def _pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    if not s:
        return math.nan
    return s[min(len(s) - 1, max(0, math.ceil(q * len(s)) - 1))]


def build_figures(rs: list[dict[str, Any]], minutes: float, n_gpus: int) -> dict[str, Any]:
    """Builds (from the pool's records) and how long each evaluation held its GPU (its wall time in
    the worker, waiting for a build included); the GPUs' busy share of the sweep's wall time."""
    # A GPU worker waiting for the pool to finish its kernel's build holds the GPU idle: counted apart.
    waits = [float((r.get("timings_s") or {}).get("build_wait", 0.0)) for r in rs]
    held = [float((r.get("timings_s") or {}).get("total", 0.0)) - w for r, w in zip(rs, waits, strict=True)]
    built = [float(r["prebuild"]["seconds"]) for r in rs if (r.get("prebuild") or {}).get("status") == "built"]
    inline = [float((r.get("timings_s") or {}).get("compile", 0.0)) for r in rs if "compile" in (r.get("timings_s") or {})]
    return {
        "gpu_held_median_s": median(held) if held else None, "gpu_held_p90_s": _pct(held, 0.9),
        "build_wait_total_s": sum(waits),
        "gpu_busy_share": sum(held) / (minutes * 60.0 * max(1, n_gpus)) if minutes > 0 else None,
        "builds": len(built), "build_median_s": median(built) if built else None, "build_p90_s": _pct(built, 0.9),
        "builds_in_evaluation": len(inline), "build_cached": sum(bool(r.get("build_cached")) for r in rs),
    }


def kernel_figures(outcomes: list[Outcome]) -> dict[str, Any]:
    """For a sweep of kernels (not the problems against themselves): per level, the kernels
    evaluated, the correct ones and fast_1 / fast_2 over them (problems without a kernel in the folder
    are not counted), and how many are faster with their whole 95% interval above 1.0."""
    levels: dict[str, Any] = {}
    for level in sorted({o.task.level for o in outcomes}):
        rs = [o.result for o in outcomes if o.task.level == level]
        entries = [_correct_speedup(r) for r in rs]
        correct = sum(r.get("status") == "correct" for r in rs)
        levels[str(level)] = {
            "kernels": len(rs), "correct": correct, "fast_0": correct / len(rs),
            "fast_1": fast_p(entries, len(rs), 1.0), "fast_2": fast_p(entries, len(rs), 2.0),
            "surely_faster": sum(bool(r.get("speedup_interval")) and r["speedup_interval"][0] > 1.0 for r in rs),
        }  # fmt: skip
    return {"kernels": True, "levels": levels}


def _correct_speedup(r: dict[str, Any]) -> float | None:
    speedup = r.get("speedup")
    return float(speedup) if r.get("status") == "correct" and speedup is not None and speedup > 0 else None


#: The parts of an evaluation's held time (``timings_s``), in the order they happen; ``other`` is the
#: rest of the held time (static checks, the sandbox's set-up and tear-down, comparisons' overhead).
STAGES = ("process_start", "load", "correctness", "timing", "instruments")


def stage_seconds(rs: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Median and p90 seconds per part of the evaluations' held time (waiting for builds left out)."""
    parts: dict[str, list[float]] = {k: [] for k in (*STAGES, "other", "held")}
    for r in rs:
        t = r.get("timings_s") or {}
        held = float(t.get("total", 0.0)) - float(t.get("build_wait", 0.0))
        for k in STAGES:
            if k in t:
                parts[k].append(float(t[k]))
        parts["other"].append(held - sum(float(t.get(k, 0.0)) for k in STAGES))
        parts["held"].append(held)
    return {k: {"median": round(median(v), 3), "p90": round(_pct(v, 0.9), 3), "n": len(v)}
            for k, v in parts.items() if v}


def summarise(outcomes: list[Outcome], minutes: float, n_gpus: int, build_workers: int = 0) -> dict[str, Any]:
    """Status counts; wall times, throughput, builds; for the problems against themselves the
    self-speedup error and the interval's coverage of 1.0, for kernels fast_p per level
    (kernel_figures)."""
    rs = [o.result for o in outcomes]
    statuses: dict[str, int] = {}
    for r in rs:
        statuses[str(r.get("status"))] = statuses.get(str(r.get("status")), 0) + 1
    timed = [r for r in rs if r.get("speedup") is not None]
    errors = [abs(float(r["speedup"]) - 1.0) for r in timed]
    covered = [r for r in timed if r.get("speedup_interval") and r["speedup_interval"][0] <= 1.0 <= r["speedup_interval"][1]]
    walls = [float((r.get("timings_s") or {}).get("total", 0.0)) for r in rs]
    speedups = [float(r["speedup"]) for r in timed if r["speedup"] > 0]
    return {
        "evaluations": len(rs), "statuses": statuses, "timed": len(timed),
        "speedup_median": median(speedups) if speedups else None,
        "speedup_geomean": math.exp(sum(math.log(s) for s in speedups) / len(speedups)) if speedups else None,
        "self_error_median": median(errors) if errors else None, "self_error_p90": _pct(errors, 0.9),
        "self_error_max": max(errors) if errors else None,
        "within_2pct": sum(e <= 0.02 for e in errors),
        "interval_covers_1": len(covered), "interval_coverage": len(covered) / len(timed) if timed else None,
        "wall_median_s": median(walls) if walls else None, "wall_p90_s": _pct(walls, 0.9),
        "wall_max_s": max(walls) if walls else None, "minutes": minutes, "gpus": n_gpus,
        "device": str(outcomes[0].gpu == "cpu" and "cpu" or "cuda") if outcomes else "cpu",
        "evals_per_min_per_gpu": len(rs) / minutes / max(1, n_gpus) if minutes > 0 else None,
        "build_workers": build_workers, **build_figures(rs, minutes, n_gpus),
        "stage_seconds": stage_seconds(rs),
        **(kernel_figures(outcomes) if any(o.task.kernel_path for o in outcomes) else {"kernels": False}),
    }


def format_summary(s: dict[str, Any]) -> str:
    lines = [f"evaluations: {s['evaluations']}  statuses: {s['statuses']}",
             f"speedup: median {_f(s['speedup_median'])}, geomean {_f(s['speedup_geomean'])} over {s['timed']} timed",
             *(_kernel_lines(s) if s.get("kernels") else _self_lines(s)),
             f"wall per evaluation: median {_f(s['wall_median_s'], '.1f')} s, p90 {_f(s['wall_p90_s'], '.1f')} s, "
             f"max {_f(s['wall_max_s'], '.1f')} s",
             f"{_f(s['minutes'], '.2f')} min on {s['gpus']} {'worker' if s['device'] == 'cpu' else 'GPU'}(s): "
             f"{_f(s['evals_per_min_per_gpu'], '.1f')} evaluations per minute per {'worker' if s['device'] == 'cpu' else 'GPU'}",
             f"held per evaluation: median {_f(s['gpu_held_median_s'], '.1f')} s, p90 {_f(s['gpu_held_p90_s'], '.1f')} s; "
             f"busy {_f(s['gpu_busy_share'], '.0%')} of the wall time; {_f(s['build_wait_total_s'], '.0f')} s waiting for builds",
             f"builds: {s['builds']} by {s['build_workers']} build process(es), median {_f(s['build_median_s'], '.1f')} s, "
             f"p90 {_f(s['build_p90_s'], '.1f')} s; {s['builds_in_evaluation']} built inside an evaluation; "
             f"{s['build_cached']} found built"]  # fmt: skip
    stages = s.get("stage_seconds") or {}
    if stages:
        lines.append("held time by part (median / p90 s): " + ", ".join(
            f"{k} {v['median']:.2f}/{v['p90']:.2f}" for k, v in stages.items()))
    return "\n".join(lines)


def _f(x: Any, spec: str = ".3f") -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, spec)


def _self_lines(s: dict[str, Any]) -> list[str]:
    """The problems against themselves: how far from 1.0 the measured speedups are."""
    return [f"self-speedup error |s-1|: median {_f(s['self_error_median'], '.2%')}, p90 {_f(s['self_error_p90'], '.2%')}, "
            f"max {_f(s['self_error_max'], '.2%')}; within 2%: {s['within_2pct']}/{s['timed']}",
            f"95% interval covers 1.0: {s['interval_covers_1']}/{s['timed']} ({_f(s['interval_coverage'], '.1%')})"]  # fmt: skip


def _kernel_lines(s: dict[str, Any]) -> list[str]:
    """Kernels: per level, correct and fast_p over the kernels evaluated."""
    return [f"level {level}: {d['correct']}/{d['kernels']} correct (fast_0 {_f(d['fast_0'], '.1%')}), "
            f"fast_1 {_f(d['fast_1'], '.1%')}, fast_2 {_f(d['fast_2'], '.1%')} of the {d['kernels']} kernels evaluated; "
            f"{d['surely_faster']} faster with the whole 95% interval above 1.0"
            for level, d in s["levels"].items()]  # fmt: skip
