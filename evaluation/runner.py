"""evaluate(): orchestrates one evaluation from the (trusted) parent process.

The parent never imports the problem or the kernel and never initialises CUDA. It starts a
reference process and a kernel process in separate sandboxes, drives them request by request,
has the reference process compare the kernel's outputs, alternates timing rounds between them and
checks every reported time against its own clock.
"""

from __future__ import annotations

import secrets
import time

from .build import BuildDir
from .correctness import check_correctness, load_models
from .hardware import hardware_slug
from .protocol import MalformedReply, ReadyReply, parse
from .sandbox import ChildError, Sandbox, SandboxProcess
from .seeds import derive_seed
from .session import Abort, Pair
from .static_checks import analyse
from .timing import measure
from .types import EvaluationConfig, EvaluationResult

__all__ = ["evaluate", "derive_seed", "hardware_slug"]


def evaluate(problem_source: str, kernel_source: str, config: EvaluationConfig | None = None) -> EvaluationResult:
    """Evaluate one kernel against its reference problem; never raises for a bad kernel.

    Phases:
    1. static checks on the kernel's source (``_static_checks``);
    2. the build directory: cache entry and per-source lock (``evaluation.build``);
    3. start the reference and the kernel sandbox (``_start``);
    4. build both models (``correctness.load_models``);
    5. correctness trials (``correctness.check_correctness``);
    6. timing rounds and their cross-checks (``timing.measure``);
    7. collect logs and environment, close the sandboxes, release the build directory (``_finish``).
    """
    cfg = config or EvaluationConfig()
    res = EvaluationResult(trials_total=cfg.correctness_trials)
    t_begin = time.monotonic()
    deadline = t_begin + cfg.timeout_s
    master = cfg.seed if cfg.seed is not None else secrets.randbits(62)
    if cfg.seed is not None:
        res.seed = cfg.seed
    _static_checks(cfg, res, problem_source, kernel_source)
    build = BuildDir(cfg.build_cache_dir, kernel_source, cfg.device)
    build.lock(deadline)
    res.build_cached = build.built
    sandbox = Sandbox(device=cfg.device, size_scale=cfg.size_scale, memory_limit_mb=cfg.memory_limit_mb,
                      hide_paths=cfg.hide_paths, isolation=cfg.isolation, build_dir=build.path,
                      disable=cfg.disable_defences, cpu_threads=cfg.cpu_threads)
    log_parts: list[str] = []
    try:
        if sandbox.switch_uid:
            build.give_to(sandbox.uids["kernel"])
        _run_phases(cfg, res, sandbox, problem_source, kernel_source, master, deadline, build, log_parts)
        _collect(res, sandbox, log_parts)
    finally:
        sandbox.close()
        if sandbox.switch_uid:
            build.give_to(0)
        build.unlock()
    _finish(cfg, res, sandbox, log_parts, t_begin)
    return res


def _static_checks(cfg: EvaluationConfig, res: EvaluationResult, problem_source: str, kernel_source: str) -> None:
    analysis = analyse(kernel_source, problem_source)
    res.backend = analysis["backend"]
    for code, msg in analysis["notes"]:
        res.add_note(code, msg)
    for code, msg in analysis["flags"]:
        if code == "harness_memory_access" and "gc_check" in cfg.disable_defences:
            continue
        res.add_flag(code, msg)


def _run_phases(cfg: EvaluationConfig, res: EvaluationResult, sandbox: Sandbox, problem_source: str,
                kernel_source: str, master: int, deadline: float, build: BuildDir, log_parts: list[str]) -> None:
    """Phases 3-6; an Abort ends them with its status (a result stays 'correct' only if it was)."""
    try:
        problem_path = sandbox.write_source("problem.py", problem_source)
        kernel_path = sandbox.write_source("kernel.py", kernel_source)
        ref, ker = _start(sandbox, problem_path, kernel_path, deadline, res)
        pair = Pair(cfg, res, ref, ker, master, deadline)
        load_models(pair, build)
        out_dtypes = check_correctness(pair, sandbox)
        if cfg.timing_trials > 0:
            measure(pair, out_dtypes)
    except Abort as ab:
        res.status, res.error = ab.status, ab.error
        if ab.status != "correct":
            res.correct = False
            res.speedup = None
            res.speedup_interval = None
        if ab.log:
            log_parts.append(ab.log)


def _start(sandbox: Sandbox, problem_path: str, kernel_path: str, deadline: float,
           res: EvaluationResult) -> tuple[SandboxProcess, SandboxProcess]:
    """Start both sandboxed processes (in parallel) and wait until each has imported torch."""
    t0 = time.monotonic()
    ref = sandbox.spawn("reference", problem_path)
    ker = sandbox.spawn("kernel", problem_path, kernel_path)
    ready: dict[str, ReadyReply] = {}
    for p in (ref, ker):
        try:
            ready[p.role] = parse(ReadyReply, p.recv(deadline))
        except ChildError as exc:
            raise Abort(exc.kind, f"{p.role} process failed to start: {exc.message}") from exc
        except MalformedReply as exc:
            raise Abort("crashed", f"{p.role} process failed to start: malformed reply: {exc}") from exc
        r = ready[p.role]
        if not r.ok:
            raise Abort(r.kind or "crashed", f"{p.role} process: {r.error}", r.traceback)
    res.timings_s["process_start"] = round(time.monotonic() - t0, 4)
    res.environment["kernel_confinement"] = ready["kernel"].confinement
    return ref, ker


def _collect(res: EvaluationResult, sandbox: Sandbox, log_parts: list[str]) -> None:
    """What the processes printed, the sandbox's environment, forged replies."""
    for p in sandbox.procs:
        text = p.read_log()
        if text.strip():
            log_parts.append(f"--- {p.role} process output ---\n{text}")
    res.environment.update(sandbox.environment())
    ker = next((p for p in sandbox.procs if p.role == "kernel"), None)
    if ker is not None and ker.forged:
        res.add_flag("forged_reply", f"The kernel wrote {ker.forged} forged message(s) into the harness's reply "
                                     "channel; they were discarded.")


def _finish(cfg: EvaluationConfig, res: EvaluationResult, sandbox: Sandbox, log_parts: list[str],
            t_begin: float) -> None:
    mode = res.environment.get("isolation_mode")
    if mode != "root":
        res.add_note("isolation_degraded", f"Sandbox mode '{mode}': no uid switch"
                                           + ("" if res.environment.get("pid_namespace") else
                                              ", no network/PID namespaces") + ".")
    res.environment["filesystem_isolated"] = bool(sandbox.switch_uid)
    res.environment["hardware_slug"] = hardware_slug(res.environment.get("device_name", ""), cfg.device)
    res.log = "\n".join(log_parts)[-50000:]
    res.timings_s["total"] = round(time.monotonic() - t_begin, 4)
