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
import secrets
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, ExitStack
from dataclasses import dataclass

from evaluation.builds.entry import BuildDir, needs_build
from evaluation.builds.stage import build_dir_for, build_env, build_locked, host_busy, recorded_failure
from evaluation.instruments.phase import run_instruments
from evaluation.phases.backends import kernel_backend, missing_library
from evaluation.phases.correctness import check_correctness, load_models
from evaluation.phases.memory_plan import check_memory
from evaluation.phases.problem_facts import problem_digest
from evaluation.phases.seeds import derive_seed
from evaluation.phases.session import Abort, Pair
from evaluation.phases.static_checks import analyse, pretrained_models, required_modules
from evaluation.phases.timing import measure
from evaluation.results.hardware import hardware_slug
from evaluation.results.harness_id import harness_identity
from evaluation.results.types import EvaluationConfig, EvaluationResult
from evaluation.sandbox.host_errors import BUSY_EVALUATION, INFRASTRUCTURE_ERROR, confirm, host_error, killed_build
from evaluation.sandbox.process import ChildError, SandboxProcess
from evaluation.sandbox.protocol import MalformedReply, OpenDeviceReply, OpenDeviceRequest, R, ReadyReply, parse
from evaluation.sandbox.sandbox import Sandbox

__all__ = ["evaluate", "prepare", "evaluate_prepared", "Prepared", "derive_seed", "hardware_slug"]



@dataclass
class Prepared:
    """An evaluation whose sandboxes are started (their processes import torch meanwhile)."""

    cfg: EvaluationConfig
    problem_source: str
    kernel_source: str
    build: BuildDir
    sandbox: Sandbox
    procs: list[SandboxProcess]
    t_started: float
    build_wait_s: float = 0.0  # waited for the entry's lock before the GPU's turn (``evaluate``)


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
    try:
        prep = prepare(problem_source, kernel_source, config)
    except OSError as exc:
        reason = host_error(exc)
        if not reason:
            raise
        return EvaluationResult(status=INFRASTRUCTURE_ERROR, error=f"could not set up the sandbox: {reason}")
    with ExitStack() as held:
        if turn is not None:
            try:
                _lock_entry_before_turn(prep)
                held.enter_context(turn())
            except BaseException:
                prep.sandbox.close()
                prep.build.unlock()
                raise
        return evaluate_prepared(prep, pause)


def _lock_entry_before_turn(prep: Prepared) -> None:
    """Take the build entry's lock before the GPU's turn, never after. A follow-up (the instruments of
    a stored verdict) holds its kernel's entry and gives the turn up between its steps to an
    evaluation that wants it: were that evaluation of the same kernel to take the turn first and then
    wait for the entry, each would wait for the other for ever (two workers on one H100 did)."""
    t0 = time.monotonic()
    prep.build.lock(t0 + prep.cfg.timeout_s)
    prep.build_wait_s = time.monotonic() - t0


def prepare(problem_source: str, kernel_source: str, config: EvaluationConfig | None = None) -> Prepared:
    """Create the sandbox and start its processes (reference, kernel[, second reference])."""
    cfg = config or EvaluationConfig()
    build = build_dir_for(kernel_source, cfg)
    sandbox = Sandbox(device=cfg.device, size_scale=cfg.size_scale, memory_limit_mb=cfg.memory_limit_mb,
                      hide_paths=cfg.hide_paths, isolation=cfg.isolation, build_dir=build.path,
                      disable=cfg.disable_defences, cpu_threads=cfg.cpu_threads,
                      max_processes=cfg.max_processes, file_size_limit_mb=cfg.file_size_limit_mb,
                      extra_env=build_env(cfg))
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
    return Prepared(cfg, problem_source, kernel_source, build, sandbox, procs, t0)


def evaluate_prepared(prep: Prepared, pause: Callable[[], float] | None = None) -> EvaluationResult:
    """Run a prepared evaluation to its end and close its sandbox.

    Phases:
    1. static checks on the kernel's source (``_static_checks``);
    2. the build cache entry: per-source lock (``evaluation.builds.entry``);
    3. pre-flight: modules the problem and the kernel need (``_preflight_modules``);
    4. the build stage, off the GPU, unless the entry is built (``_build_stage``), then the entry is
       handed to the kernel's uid; processes ready (``_start``), memory the inputs need;
    5. load the models: the kernel's module only loads what was built (``correctness.load_models``);
    6. correctness trials (``correctness.check_correctness``);
    7. timing rounds and their cross-checks (``timing.measure``), then the reviewer's instruments
       (``instruments.phase.run_instruments``: precision, shapes, determinism, speed of light, profile);
    8. collect logs and environment, close the sandbox, publish or drop what the GPU phase built and
       release the entry (``_release_build``, ``_finish``).
    """
    cfg, sandbox, build = prep.cfg, prep.sandbox, prep.build
    res = EvaluationResult(trials_total=cfg.correctness_trials)
    res.environment.update(harness_identity())  # which code measured it, whatever the outcome
    t_begin = time.monotonic()
    deadline = t_begin + cfg.timeout_s
    master = cfg.seed if cfg.seed is not None else secrets.randbits(62)
    if cfg.seed is not None:
        res.seed = cfg.seed
    _static_checks(cfg, res, prep.problem_source, prep.kernel_source)
    # Waits while another process builds or uses this source; a dead owner's lock is already gone.
    t_wait = time.monotonic()
    build.lock(deadline)  # held already where ``evaluate`` took it before a turn
    res.timings_s["build_wait"] = round(prep.build_wait_s + time.monotonic() - t_wait, 4)
    deadline += time.monotonic() - t_wait  # another evaluation's time, not this kernel's
    res.build_cached = build.built
    log_parts: list[str] = []
    try:
        _run_phases(prep, res, master, deadline, log_parts, pause)
        _collect(res, sandbox, log_parts)
    finally:
        try:
            sandbox.close()
        finally:  # the entry is given back and unlocked whatever closing the sandbox raised
            _release_build(prep, res)
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


def _run_phases(prep: Prepared, res: EvaluationResult, master: int, deadline: float, log_parts: list[str],
                pause: Callable[[], float] | None = None) -> None:
    """Phases 3-6; an Abort ends them with its status (a result stays 'correct' only if it was)."""
    cfg = prep.cfg
    try:
        _preflight_modules(prep)
        deadline += _build_stage(prep, res, deadline)  # the wait for the host's headers: not the kernel's
        ref, ker, ref2 = _start(prep, deadline, res)
        pair = Pair(cfg, res, ref, ker, master, deadline, ref2, pause, problem_digest(prep.problem_source))
        check_memory(pair)
        load_models(pair)
        out_dtypes = check_correctness(pair, prep.sandbox)
        if cfg.timing_trials > 0:
            measure(pair, out_dtypes)
        elif cfg.earlier_timing is not None:
            cfg.earlier_timing.apply_to(res)
        run_instruments(pair, prep.sandbox)  # after the timed rounds: they never perturb them
    except Abort as ab:
        if ab.status == INFRASTRUCTURE_ERROR:
            ab = _host_or_kernel(prep, ab)
        elif ab.status == "timeout":
            ab = _timeout_of_a_busy_host(cfg, ab)
        res.status, res.error = ab.status, ab.error
        if ab.status != "correct":
            res.correct = False
            res.speedup = None
            res.speedup_interval = None
        if ab.log:
            log_parts.append(ab.log)


def _host_or_kernel(prep: Prepared, ab: Abort) -> Abort:
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
    confirmed = confirm([prep.sandbox.root, prep.build.path or ""])
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


def _preflight_modules(prep: Prepared) -> None:
    """A problem or kernel that imports a module this host lacks (e.g. level 4's ``transformers``)
    ends at once, naming it."""
    weights = pretrained_models(prep.problem_source)
    if weights:
        raise Abort("runtime_error", "reference failed: the problem loads pretrained weights with from_pretrained ("
                    + ", ".join(weights) + "); the sandbox has no network and no copy of them")
    missing = missing_modules(prep.problem_source)
    if missing:
        raise Abort("runtime_error", "reference failed: the problem needs module(s) not installed on this host: "
                    + ", ".join(missing))
    # A kernel for one of KernelBench's backends that this host cannot run ends at once, naming
    # what is missing (the Python package, nvcc, hipcc, ThunderKittens' headers, a GPU).
    reason = missing_library(kernel_backend(prep.kernel_source), prep.cfg.device)
    if reason:
        raise Abort("compile_error", reason)
    missing = missing_modules(prep.kernel_source)
    if missing:
        raise Abort("compile_error", "the kernel needs module(s) not installed on this host: " + ", ".join(missing))


def _build_stage(prep: Prepared, res: EvaluationResult, deadline: float) -> float:
    """Compile off the GPU (no GPU visible to the build process) unless the entry is built; a compiler
    error, recorded or new, ends the evaluation as ``compile_error`` before the GPU phase. Then the
    entry (or a private folder, for what the GPU phase itself builds: Triton, lazy builds) goes to
    the kernel's uid. Returns the seconds spent on the host's work (waiting for its headers, and for
    units other builds compiled)."""
    host_s = 0.0
    build = prep.build
    if build.locked:
        failure = recorded_failure(build)
        if failure is not None:
            raise Abort("compile_error", failure.get("error") or "the kernel failed to build", failure.get("log", ""))
        res.build_cached = build.built  # an entry recorded for a killed build was dropped: not cached
        if not build.built and needs_build(prep.kernel_source):
            out = build_locked(build, prep.kernel_source, prep.cfg, deadline)
            host_s = out.host_s
            res.timings_s["compile"] = round(out.seconds, 4)
            res.environment["build_steps_s"] = out.steps_s
            res.environment["build_headers"] = {"headers": out.headers, "why": out.headers_why,
                                                "wait_s": round(out.headers_s, 3)}
            if out.status == INFRASTRUCTURE_ERROR:  # killed from outside: retried, never a verdict
                raise Abort(INFRASTRUCTURE_ERROR, out.error or "the build was killed", out.log)
            if out.status in ("compile_error", "timeout", "crashed"):
                raise Abort(out.status, out.error or "the kernel failed to build", out.log)
        if not build.built:
            build.begin()
    if prep.sandbox.switch_uid and build.locked:
        if build.private:  # the GPU phase builds (Triton, lazy builds): its own folder
            build.give_to(prep.sandbox.uids["kernel"])
        else:  # a published entry: read-only to the kernel
            build.lend(prep.sandbox.uids["kernel"])
    return host_s


def _release_build(prep: Prepared, res: EvaluationResult) -> None:
    """Back to root; what the GPU phase built is published if the kernel loaded, else dropped."""
    build = prep.build
    try:
        if prep.sandbox.switch_uid and build.locked:
            if build.private:
                build.give_to(0)
            else:
                build.reclaim()  # what the kernel added to a published entry goes
        if build.private:
            if res.compiled:
                build.publish()
            else:
                build.abandon()
    finally:
        build.unlock()


def _start(prep: Prepared, deadline: float,
           res: EvaluationResult) -> tuple[SandboxProcess, SandboxProcess, SandboxProcess | None]:
    """Wait until each started process has imported torch, then have them open the device."""
    t0 = max(prep.t_started, time.monotonic())  # prepared ahead: only the wait on the critical path counts
    ready = {p.role: _host_reply(p, ReadyReply, deadline, "failed to start") for p in prep.procs}
    res.timings_s["process_start"] = round(time.monotonic() - t0, 4)
    res.timings_s["device_open"] = _open_device(prep.procs, deadline)
    res.environment["kernel_confinement"] = ready["kernel"].confinement
    by_role = {p.role: p for p in prep.procs}
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
