"""evaluate(): orchestrates one evaluation from the (trusted) parent process.

The parent never imports the problem or the kernel and never initialises CUDA. It starts a
reference process and a kernel process in separate sandboxes (on CUDA, a second reference process
too), drives them request by request, has the reference process compare the kernel's outputs,
alternates timing rounds between them and checks every reported time against its own clock.

``prepare()`` starts the sandboxes of an evaluation ahead of time (the sweep starts the next
evaluation's processes while the current one runs); ``evaluate_prepared()`` runs it.
"""

from __future__ import annotations

import importlib.util
import os
import secrets
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, ExitStack
from dataclasses import dataclass, field

from evaluation.builds.entry import BuildDir, needs_build
from evaluation.builds.stage import build_dir_for, build_env, build_locked, host_busy, recorded_failure
from evaluation.instruments.phase import run_instruments
from evaluation.phases.backends import kernel_backend, missing_library
from evaluation.phases.correctness import check_correctness, load_models
from evaluation.phases.memory_plan import check_memory
from evaluation.phases.problem_facts import problem_digest
from evaluation.phases.sandboxes import sandbox_for
from evaluation.phases.seeds import derive_seed
from evaluation.phases.session import Abort, Pair
from evaluation.phases.static_checks import analyse, pretrained_models, required_modules
from evaluation.phases.timing import measure
from evaluation.results.hardware import hardware_slug
from evaluation.results.harness_id import harness_identity
from evaluation.results.types import EvaluationConfig, EvaluationResult
from evaluation.sandbox.host_errors import (
    BUSY_EVALUATION,
    INFRASTRUCTURE_ERROR,
    STALE_ENTRY,
    confirm,
    host_error,
    killed_build,
    stale_entry,
)
from evaluation.sandbox.process import ChildError, SandboxProcess
from evaluation.sandbox.protocol import MalformedReply, OpenDeviceReply, OpenDeviceRequest, R, ReadyReply, parse
from evaluation.sandbox.sandbox import Sandbox

__all__ = ["evaluate", "prepare", "evaluate_prepared", "Prepared", "derive_seed", "hardware_slug"]



@dataclass
class Started:
    """The problem's half of an evaluation: its sandbox, with the problem and the kernel written there,
    and the processes started in it (importing torch meanwhile)."""

    sandbox: Sandbox
    procs: list[SandboxProcess]
    problem_source: str
    t_started: float


@dataclass
class Prepared:
    """An evaluation made ready ahead (the sweep's): its config, the kernel's build entry, and the
    problem's half, started. The two halves stay apart: the build entry is the kernel's alone (keyed
    by its source) and never sees the problem, the result or the sandbox's processes."""

    cfg: EvaluationConfig
    kernel_source: str
    build: BuildDir
    started: Started

    def close(self) -> None:
        """Its processes and folder go, and the entry's lock: one never run (a sweep interrupted), or
        one whose own close an interrupt may have cut short (closing again is safe)."""
        _close_unrun(self.started, self.build)


def evaluate(problem_source: str, kernel_source: str, config: EvaluationConfig | None = None,
             turn: Callable[[], AbstractContextManager[object]] | None = None,
             pause: Callable[[], float] | None = None) -> EvaluationResult:
    """Evaluate one kernel against its reference problem; never raises for a bad kernel. A host that
    cannot even set the sandbox up (a full scratch disk) gives an INFRASTRUCTURE_ERROR result.

    ``turn``, when given, is entered after the sandbox's processes are started and the build entry is
    locked (the entry before the turn, always: ``_lock_entry_before_turn``), before anything
    else (the build, the device, the clock): workers that share one GPU wait there for it while
    their next evaluation's processes import torch. An exception from it closes the sandbox and
    propagates (a failure of the host, never a verdict). ``pause``, when given, is called between the
    instruments' steps (a run of the instruments alone, after a verdict, may give the GPU to another
    evaluation there) and returns the seconds it waited, which the instruments' budget gets back."""
    cfg = config or EvaluationConfig()
    try:
        build = build_dir_for(kernel_source, cfg)
        started = start_sandbox(problem_source, kernel_source, cfg, build.path)
    except OSError as exc:
        reason = host_error(exc)
        if not reason:
            raise
        return EvaluationResult(status=INFRASTRUCTURE_ERROR, error=f"could not set up the sandbox: {reason}")
    with ExitStack() as held:
        waited_s = 0.0
        if turn is not None:
            try:
                waited_s = _lock_entry_before_turn(build, cfg)
                held.enter_context(turn())
            except BaseException:
                _close_unrun(started, build)
                raise
        return run_started(cfg, kernel_source, build, started, waited_s, pause)


def _lock_entry_before_turn(build: BuildDir, cfg: EvaluationConfig) -> float:
    """Take the build entry's lock before the GPU's turn, never after; returns the seconds waited. A
    follow-up (the instruments of a stored verdict) holds its kernel's entry and gives the turn up
    between its steps to an evaluation that wants it: were that evaluation of the same kernel to take
    the turn first and then wait for the entry, each would wait for the other for ever (two workers
    on one H100 did)."""
    t0 = time.monotonic()
    build.lock(t0 + cfg.timeout_s)
    return time.monotonic() - t0


def prepare(problem_source: str, kernel_source: str, config: EvaluationConfig | None = None) -> Prepared:
    """Make an evaluation ready ahead: its build entry, and its sandbox's processes started."""
    cfg = config or EvaluationConfig()
    build = build_dir_for(kernel_source, cfg)  # made apart, as `evaluate` does: neither half carries the other
    return Prepared(cfg, kernel_source, build, start_sandbox(problem_source, kernel_source, cfg, build.path))


def evaluate_prepared(prep: Prepared, pause: Callable[[], float] | None = None) -> EvaluationResult:
    """Run a prepared evaluation to its end and close its sandbox (``run_started``)."""
    return run_started(prep.cfg, prep.kernel_source, prep.build, prep.started, 0.0, pause)


def start_sandbox(problem_source: str, kernel_source: str, cfg: EvaluationConfig, build_path: str | None) -> Started:
    """Create the sandbox and start its processes (reference, kernel[, second reference]); the build
    entry's folder is only named, for the kernel's process to load from."""
    sandbox = sandbox_for(cfg, build_dir=build_path, disable=cfg.disable_defences, extra_env=build_env(cfg))
    try:
        problem_path = sandbox.write_source("problem.py", problem_source)
        kernel_path = sandbox.write_source("kernel.py", kernel_source)
        t0 = time.monotonic()
        procs = [sandbox.spawn("reference", problem_path), sandbox.spawn("kernel", problem_path, kernel_path)]
        if cfg.n_reference_processes == 2:
            procs.append(sandbox.spawn("reference2", problem_path))
    except BaseException:
        sandbox.close()  # its folder and watchdog thread, and any process already started
        raise
    return Started(sandbox, procs, problem_source, t0)


def run_started(cfg: EvaluationConfig, kernel_source: str, build: BuildDir, started: Started, waited_s: float = 0.0,
        pause: Callable[[], float] | None = None) -> EvaluationResult:
    """Run a started evaluation to its end and close its sandbox. ``waited_s``: the seconds already
    waited for the build entry's lock (``evaluate``, before a turn).

    Phases:
    1. static checks on the kernel's source (``_static_checks``);
    2. the build cache entry: per-source lock (``evaluation.builds.entry``);
    3. pre-flight: modules the problem needs (``_preflight_problem``);
    4. the kernel's half, off the GPU (``_build_stage``): the backend and modules it needs, then its
       build unless the entry is built; it reports to this function, which records; then the entry is
       handed to the kernel's uid (``_hand_over``); processes ready (``_start``), memory the inputs need;
    5. load the models: the kernel's module only loads what was built (``correctness.load_models``);
    6. correctness trials (``correctness.check_correctness``);
    7. timing rounds and their cross-checks (``timing.measure``), then the reviewer's instruments
       (``instruments.phase.run_instruments``: precision, shapes, determinism, speed of light, profile);
    8. collect logs and environment, close the sandbox, publish or drop what the GPU phase built and
       release the entry (``_release_build``, ``_finish``).
    """
    res = EvaluationResult(trials_total=cfg.correctness_trials)
    res.environment.update(harness_identity())  # which code measured it, whatever the outcome
    t_begin = time.monotonic()
    deadline = t_begin + cfg.timeout_s
    master = cfg.seed if cfg.seed is not None else secrets.randbits(62)
    if cfg.seed is not None:
        res.seed = cfg.seed
    try:
        _static_checks(cfg, res, started.problem_source, kernel_source)
        # Waits while another process builds or uses this source; a dead owner's lock is already gone.
        t_wait = time.monotonic()
        build.lock(deadline)  # held already where ``evaluate`` took it before a turn
    except BaseException:  # a check that failed on our side, or the sweep interrupted: nothing left running
        _close_unrun(started, build)
        raise
    res.timings_s["build_wait"] = round(waited_s + time.monotonic() - t_wait, 4)
    deadline += time.monotonic() - t_wait  # another evaluation's time, not this kernel's
    res.build_cached = build.built
    log_parts: list[str] = []
    try:
        _run_phases(cfg, kernel_source, build, started, res, master, deadline, log_parts, pause)
        _collect(res, started.sandbox, log_parts)
    finally:
        try:
            started.sandbox.close()
        finally:  # the entry is given back and unlocked whatever closing the sandbox raised
            _release_build(build, started.sandbox.switch_uid, res.compiled, stale=(res.error or "").startswith(STALE_ENTRY))
    _finish(cfg, res, started.sandbox, log_parts, t_begin)
    return res


def _close_unrun(started: Started, build: BuildDir) -> None:
    """An evaluation given up (before its phases, or a stopped sweep's): its sandbox's processes (their
    own sessions: nothing else ends them) and folder go, and the entry's lock if it was taken."""
    try:
        started.sandbox.close()
    finally:
        build.unlock()


def _static_checks(cfg: EvaluationConfig, res: EvaluationResult, problem_source: str, kernel_source: str) -> None:
    analysis = analyse(kernel_source, problem_source)
    res.backend = analysis["backend"]
    for code, msg in analysis["notes"]:
        res.add_note(code, msg)
    for code, msg in analysis["flags"]:
        if code == "harness_memory_access" and "gc_check" in cfg.disable_defences:
            continue
        res.add_flag(code, msg)


def missing_modules(source: str) -> list[str]:
    """Top-level modules ``source`` imports that this Python cannot find."""
    missing = []
    for name in required_modules(source):
        try:
            if importlib.util.find_spec(name) is None:
                missing.append(name)
        except (ImportError, ValueError):
            missing.append(name)
    return missing


def _run_phases(cfg: EvaluationConfig, kernel_source: str, build: BuildDir, started: Started,
                res: EvaluationResult, master: int, deadline: float, log_parts: list[str],
                pause: Callable[[], float] | None = None) -> None:
    """Phases 3-6; an Abort ends them with its status (a result stays 'correct' only if it was)."""
    try:
        _preflight_problem(started.problem_source)
        stage = _build_stage(cfg, kernel_source, build, deadline)
        stage.record(res)
        if stage.abort is not None:
            raise stage.abort
        deadline += stage.host_s  # the wait for the host's headers: not the kernel's
        if started.sandbox.switch_uid:
            _hand_over(build, started.sandbox.uids["kernel"])
        ref, ker, ref2 = _start(started, deadline, res)
        pair = Pair(cfg, res, ref, ker, master, deadline, ref2, pause, problem_digest(started.problem_source))
        check_memory(pair)
        load_models(pair)
        out_dtypes = check_correctness(pair, started.sandbox)
        if cfg.timing_trials > 0:
            measure(pair, out_dtypes)
        elif cfg.earlier_timing is not None:
            cfg.earlier_timing.apply_to(res)
        run_instruments(pair, started.sandbox)  # after the timed rounds: they never perturb them
    except Abort as ab:
        stale = _stale_entry(build, ab)
        if stale is not None:
            ab = stale
        elif ab.status == INFRASTRUCTURE_ERROR:
            ab = _host_or_kernel(started.sandbox.root, build.path, ab)
        elif ab.status == "timeout":
            ab = _timeout_of_a_busy_host(cfg, ab)
        res.status, res.error = ab.status, ab.error
        if ab.status != "correct":
            res.correct = False
            res.speedup = None
            res.speedup_interval = None
        if ab.log:
            log_parts.append(ab.log)


def _stale_entry(build: BuildDir, ab: Abort) -> Abort | None:
    """The kernel's process could not load a published entry because torch could not rewrite its
    build.ninja (``host_errors.stale_entry``), whether at import, construction or a call: no verdict,
    and the entry is dropped when it is released, so that the next attempt builds it again. Only the
    kernel's text says so (a kernel could print it: it then loses its own entry and, after its
    attempts, ends ``failed``; it never counts against the host)."""
    if not ab.kernel_side or not build.path or build.private:
        return None
    stale = stale_entry(ab.error, os.path.join(build.path, "torch_extensions"))
    return Abort(INFRASTRUCTURE_ERROR, f"{stale} (no verdict: {ab.error})", ab.log) if stale else None


def _host_or_kernel(scratch: str, build_path: str | None, ab: Abort) -> Abort:
    """A failure of the host (``evaluation.sandbox.host_errors``) gives no verdict. The kernel's process
    could raise one itself to dodge its verdict, so the host must confirm it: its scratch or build
    folder short of space or failing a write. Unconfirmed, it is the kernel's runtime error."""
    if not ab.kernel_side:
        return ab  # the reference's process and the parent are trusted
    killed = killed_build(f"{ab.error}\n{ab.log}")
    if killed:
        # A compiler killed by a signal gives no verdict, and says nothing the host can check: it
        # does not count against the host (host_errors.counts_against_host). A kernel that fakes
        # one gains nothing: after its attempts it ends `failed`, never on a board.
        return Abort(INFRASTRUCTURE_ERROR, f"{killed} (no verdict: {ab.error})", ab.log)
    confirmed = confirm([scratch, build_path or ""])
    if confirmed:
        return Abort(INFRASTRUCTURE_ERROR, f"{ab.error} (the host: {confirmed})", ab.log)
    return Abort("runtime_error", f"{ab.error} (the host had room: the kernel's own error)", ab.log)


def _timeout_of_a_busy_host(cfg: EvaluationConfig, ab: Abort) -> Abort:
    """A timeout while the host was busy with its own work or loaded beyond its cores (the build
    stage's test, ``build_stage.host_busy``) is the host's: no verdict, evaluated again later."""
    busy = host_busy(cfg)
    if not busy:
        return ab
    return Abort(INFRASTRUCTURE_ERROR, f"{BUSY_EVALUATION} {busy}: {ab.error} (no verdict: evaluated again later)",
                 ab.log)


def _preflight_problem(problem_source: str) -> None:
    """A problem that loads pretrained weights, or imports a module this host lacks (e.g. level 4's
    ``transformers``), ends at once, naming it."""
    weights = pretrained_models(problem_source)
    if weights:
        raise Abort("runtime_error", "reference failed: the problem loads pretrained weights with from_pretrained ("
                    + ", ".join(weights) + "); the sandbox has no network and no copy of them")
    missing = missing_modules(problem_source)
    if missing:
        raise Abort("runtime_error", "reference failed: the problem needs module(s) not installed on this host: "
                    + ", ".join(missing))


@dataclass
class StageReport:
    """What the build stage did, for ``run_started`` to record: the stage never writes the result."""

    abort: Abort | None = None  # how the evaluation ends here, if it does
    host_s: float = 0.0  # the host's own work the build waited for (its headers, other builds' units)
    build_cached: bool | None = None  # None: the entry is not locked (no build folder), nothing to say
    compile_s: float | None = None  # set when this stage compiled
    steps_s: dict[str, float] = field(default_factory=dict)
    headers: dict[str, object] = field(default_factory=dict)

    def record(self, res: EvaluationResult) -> None:
        if self.build_cached is not None:
            res.build_cached = self.build_cached
        if self.compile_s is not None:
            res.timings_s["compile"] = self.compile_s
            res.environment["build_steps_s"] = self.steps_s
            res.environment["build_headers"] = self.headers


def _build_stage(cfg: EvaluationConfig, kernel_source: str, build: BuildDir, deadline: float) -> StageReport:
    """The kernel's half before the GPU: a kernel for one of KernelBench's backends that this host
    cannot run, or that imports a module it lacks, ends at once, naming what is missing (the Python
    package, nvcc, hipcc, ThunderKittens' headers, a GPU). Then it is compiled off the GPU (no GPU
    visible to the build process) unless the entry is built; a compiler error, recorded or new, ends
    the evaluation as ``compile_error`` before the GPU phase. Without an error, the entry is begun: a
    private folder for what the GPU phase itself builds (Triton, lazy builds)."""
    reason = missing_library(kernel_backend(kernel_source), cfg.device)
    if reason:
        return StageReport(Abort("compile_error", reason))
    missing = missing_modules(kernel_source)
    if missing:
        return StageReport(Abort("compile_error", "the kernel needs module(s) not installed on this host: "
                                 + ", ".join(missing)))
    if not build.locked:
        return StageReport()
    failure = recorded_failure(build)
    if failure is not None:
        return StageReport(Abort("compile_error", failure.get("error") or "the kernel failed to build",
                                 failure.get("log", "")))
    report = StageReport(build_cached=build.built)  # an entry recorded for a killed build was dropped: not cached
    if not build.built and needs_build(kernel_source):
        out = build_locked(build, kernel_source, cfg, deadline)
        report.host_s, report.compile_s, report.steps_s = out.host_s, round(out.seconds, 4), out.steps_s
        report.headers = {"headers": out.headers, "why": out.headers_why, "wait_s": round(out.headers_s, 3)}
        if out.status == INFRASTRUCTURE_ERROR:  # killed from outside: retried, never a verdict
            report.abort = Abort(INFRASTRUCTURE_ERROR, out.error or "the build was killed", out.log)
        elif out.status in ("compile_error", "timeout", "crashed"):
            report.abort = Abort(out.status, out.error or "the kernel failed to build", out.log)
    if report.abort is None and not build.built:
        build.begin()
    return report


def _hand_over(build: BuildDir, kernel_uid: int) -> None:
    """The locked entry goes to the kernel's uid: a private folder (what the GPU phase builds) as its
    own, a published entry read-only."""
    if not build.locked:
        return
    if build.private:
        build.give_to(kernel_uid)
    else:
        build.lend(kernel_uid)


def _release_build(build: BuildDir, switch_uid: bool, compiled: bool, stale: bool = False) -> None:
    """Back to root; what the GPU phase built is published if the kernel loaded, else dropped; a
    published entry the kernel's process could not load (``_stale_entry``) is dropped."""
    try:
        if switch_uid and build.locked:
            if build.private:
                build.give_to(0)
            else:
                build.reclaim()  # what the kernel added to a published entry goes
        if build.private:
            if compiled:
                build.publish()
            else:
                build.abandon()
        elif stale:
            build.drop()
    finally:
        build.unlock()


def _start(started: Started, deadline: float,
           res: EvaluationResult) -> tuple[SandboxProcess, SandboxProcess, SandboxProcess | None]:
    """Wait until each started process has imported torch, then have them open the device."""
    t0 = max(started.t_started, time.monotonic())  # prepared ahead: only the wait on the critical path counts
    ready = {p.role: _host_reply(p, ReadyReply, deadline, "failed to start") for p in started.procs}
    res.timings_s["process_start"] = round(time.monotonic() - t0, 4)
    res.timings_s["device_open"] = _open_device(started.procs, deadline)
    res.environment["kernel_confinement"] = ready["kernel"].confinement
    by_role = {p.role: p for p in started.procs}
    return by_role["reference"], by_role["kernel"], by_role.get("reference2")


def _open_device(procs: list[SandboxProcess], deadline: float) -> float:
    """Every process opens the device side by side (CUDA's context, its events, the spin's
    calibration): now, with the GPU held, never while it imported torch ahead of its turn. Returns
    the seconds it took."""
    t0 = time.monotonic()
    for p in procs:
        try:
            p.send(OpenDeviceRequest())
        except ChildError as exc:
            raise Abort(INFRASTRUCTURE_ERROR, f"{p.role} process could not open the device: {exc.message}") from exc
    for p in procs:
        _host_reply(p, OpenDeviceReply, deadline, "could not open the device")
    return round(time.monotonic() - t0, 4)


def _host_reply(p: SandboxProcess, cls: type[R], deadline: float, failed: str) -> R:
    """The next reply of a process none of the kernel's code has run in yet (it is imported at
    'load'): a process that fails there is the host's failure (a sandbox that cannot be set up,
    torch or the device that cannot load), never a verdict."""
    try:
        reply = parse(cls, p.recv(deadline))
    except ChildError as exc:
        raise Abort(INFRASTRUCTURE_ERROR, f"{p.role} process {failed}: {exc.message}") from exc
    except MalformedReply as exc:
        raise Abort(INFRASTRUCTURE_ERROR, f"{p.role} process {failed}: malformed reply: {exc}") from exc
    if not reply.ok:
        raise Abort(INFRASTRUCTURE_ERROR, f"{p.role} process {failed}: {reply.error}", reply.traceback)
    return reply


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
    if not res.compiled:  # a review note on code that never built or loaded says nothing
        res.notes = [note for note in res.notes if note["code"] != "pytorch_only"]
    mode = res.environment.get("isolation_mode")
    if mode != "root":
        res.add_note("isolation_degraded", f"Sandbox mode '{mode}': no uid switch"
                                           + ("" if res.environment.get("pid_namespace") else
                                              ", no network/PID namespaces") + ".")
    res.environment["filesystem_isolated"] = bool(sandbox.switch_uid)
    res.environment["hardware_slug"] = hardware_slug(res.environment.get("device_name", ""), cfg.device)
    res.log = "\n".join(log_parts)[-50000:]
    res.timings_s["total"] = round(time.monotonic() - t_begin, 4)
