"""evaluate(): orchestrates one evaluation from the (trusted) parent process.

The parent never imports the problem or the kernel and never initialises CUDA. It starts a
reference process and a kernel process in separate sandboxes, drives them request by request,
compares their outputs itself, alternates timing rounds between them and checks every reported
time against its own clock.
"""

from __future__ import annotations

import hashlib
import math
import os
import secrets
import sys
import time
from typing import Any

from . import static_checks
from .compare import spots_match
from .sandbox import ChildError, Sandbox, SandboxProcess
from .stats import bootstrap_speedup_ci, median, summary
from .types import EvaluationConfig, EvaluationResult


def derive_seed(master: int, *parts: Any) -> int:
    h = hashlib.sha256(repr((master, *parts)).encode()).digest()
    return int.from_bytes(h[:8], "little") & ((1 << 63) - 1)


def _torch_version() -> str:
    try:
        from importlib.metadata import version

        return version("torch")
    except Exception:  # noqa: BLE001
        return "unknown"


def build_key(kernel_source: str, device: str) -> str:
    blob = "\0".join([kernel_source, device, _torch_version(), sys.version.split()[0],
                      os.environ.get("TORCH_CUDA_ARCH_LIST", ""), os.environ.get("CUDA_VISIBLE_DEVICES", "")])
    return hashlib.sha256(blob.encode()).hexdigest()[:24]


def _prepare_build_dir(cfg: EvaluationConfig, kernel_source: str) -> tuple[str | None, bool]:
    """Per-source build directory under the cache root. Returns (path, was_already_built)."""
    try:
        root = cfg.build_cache_dir
        os.makedirs(root, mode=0o755, exist_ok=True)
        if os.geteuid() == 0:
            os.chmod(root, 0o755)
        path = os.path.join(root, build_key(kernel_source, cfg.device))
        os.makedirs(path, mode=0o755, exist_ok=True)
        for sub in ("torch_extensions", "triton"):
            os.makedirs(os.path.join(path, sub), exist_ok=True)
        return path, os.path.exists(os.path.join(path, ".kb_built"))
    except OSError:
        return None, False


def _lock_build_dir(build_dir: str | None, deadline: float) -> int | None:
    """Serialise evaluations of the same source on this host (they share a build directory, which
    belongs to one evaluation's uid at a time). The lock lives in a root-owned directory beside the
    per-source directories, out of the kernel's reach. Gives up (no lock) at the deadline."""
    import fcntl

    if not build_dir:
        return None
    locks = os.path.join(os.path.dirname(build_dir), ".locks")
    try:
        os.makedirs(locks, mode=0o700, exist_ok=True)
        fd = os.open(os.path.join(locks, os.path.basename(build_dir) + ".lock"), os.O_CREAT | os.O_RDWR, 0o600)
    except OSError:
        return None
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except OSError:
            if time.monotonic() > deadline:
                os.close(fd)
                return None
            time.sleep(0.2)


def _chown_tree(path: str, uid: int, gid: int) -> None:
    for dirpath, dirnames, filenames in os.walk(path):
        for name in [dirpath] + [os.path.join(dirpath, f) for f in dirnames + filenames]:
            try:
                os.lchown(name, uid, gid)
            except OSError:
                pass


class _Abort(Exception):
    def __init__(self, status: str, error: str, log: str = "") -> None:
        super().__init__(error)
        self.status = status
        self.error = error
        self.log = log


def _merge_flags(res: EvaluationResult, reply: dict[str, Any]) -> None:
    for code, msg in (reply.get("flags") or {}).items():
        res.add_flag(str(code), str(msg))


def evaluate(problem_source: str, kernel_source: str, config: EvaluationConfig | None = None) -> EvaluationResult:
    """Evaluate one kernel against its reference problem; never raises for a bad kernel."""
    cfg = config or EvaluationConfig()
    res = EvaluationResult(trials_total=cfg.correctness_trials)
    t_begin = time.monotonic()
    deadline = t_begin + cfg.timeout_s
    master = cfg.seed if cfg.seed is not None else secrets.randbits(62)
    if cfg.seed is not None:
        res.seed = cfg.seed
    analysis = static_checks.analyse(kernel_source, problem_source)
    res.backend = analysis["backend"]
    for code, msg in analysis["notes"]:
        res.add_note(code, msg)
    for code, msg in analysis["flags"]:
        if code == "harness_memory_access" and "gc_check" in cfg.disable_defences:
            continue
        res.add_flag(code, msg)
    build_dir, _ = _prepare_build_dir(cfg, kernel_source)
    lock_fd = _lock_build_dir(build_dir, deadline)
    res.build_cached = build_dir is not None and os.path.exists(os.path.join(build_dir, ".kb_built"))
    log_parts: list[str] = []
    sandbox = Sandbox(device=cfg.device, size_scale=cfg.size_scale, memory_limit_mb=cfg.memory_limit_mb,
                      hide_paths=cfg.hide_paths, isolation=cfg.isolation, build_dir=build_dir,
                      disable=cfg.disable_defences, cpu_threads=cfg.cpu_threads)
    ref: SandboxProcess | None = None
    ker: SandboxProcess | None = None
    try:
        if build_dir and sandbox.switch_uid:
            _chown_tree(build_dir, sandbox.uids["kernel"], sandbox.uids["kernel"])
        problem_path = sandbox.write_source("problem.py", problem_source)
        kernel_path = sandbox.write_source("kernel.py", kernel_source)
        try:
            _run(cfg, res, sandbox, problem_path, kernel_path, master, deadline, build_dir)
        except _Abort as ab:
            res.status, res.error = ab.status, ab.error
            if ab.status != "correct":
                res.correct = False
                res.speedup = None
                res.speedup_interval = None
            if ab.log:
                log_parts.append(ab.log)
        for p in sandbox.procs:
            text = p.read_log()
            if text.strip():
                log_parts.append(f"--- {p.role} process output ---\n{text}")
            if p.role == "kernel":
                ker = p
            else:
                ref = p
        res.environment.update(sandbox.environment())
        if ker is not None and ker.forged:
            res.add_flag("forged_reply", f"The kernel wrote {ker.forged} forged message(s) into the harness's reply "
                                         "channel; they were discarded.")
    finally:
        sandbox.close()
        if build_dir and sandbox.switch_uid:
            _chown_tree(build_dir, 0, 0)
        if lock_fd is not None:
            os.close(lock_fd)  # releases the flock
    if res.environment.get("isolation_mode") != "root":
        res.add_note("isolation_degraded", f"Sandbox mode '{res.environment.get('isolation_mode')}': "
                                           "no uid switch" + ("" if res.environment.get("pid_namespace") else
                                                              ", no network/PID namespaces") + ".")
    res.environment["filesystem_isolated"] = bool(sandbox.switch_uid)
    res.environment["hardware_slug"] = hardware_slug(res.environment.get("device_name", ""), cfg.device)
    res.log = "\n".join(log_parts)[-50000:]
    res.timings_s["total"] = round(time.monotonic() - t_begin, 4)
    del ref, ker
    return res


def hardware_slug(device_name: str, device: str) -> str:
    import re

    if device == "cpu":
        return "cpu"
    m = re.search(r"\b([A-Z]{1,2}\d{2,4}[A-Z]?)\b", device_name.upper().replace("NVIDIA", ""))
    if m:
        return m.group(1).lower()
    return re.sub(r"[^a-z0-9]+", "-", device_name.lower()).strip("-") or device


def _start(sandbox: Sandbox, problem_path: str, kernel_path: str, deadline: float,
           res: EvaluationResult) -> tuple[SandboxProcess, SandboxProcess]:
    t0 = time.monotonic()
    ref = sandbox.spawn("reference", problem_path)
    ker = sandbox.spawn("kernel", problem_path, kernel_path)
    replies = {}
    for p in (ref, ker):
        try:
            replies[p.role] = p.recv(deadline)
        except ChildError as exc:
            raise _Abort(exc.kind, f"{p.role} process failed to start: {exc.message}") from exc
        if not replies[p.role].get("ok"):
            r = replies[p.role]
            raise _Abort(r.get("kind", "crashed"), f"{p.role} process: {r.get('error')}", r.get("traceback", ""))
    res.timings_s["process_start"] = round(time.monotonic() - t0, 4)
    conf = replies["kernel"].get("confinement", {})
    res.environment["kernel_confinement"] = conf
    return ref, ker


def _run(cfg: EvaluationConfig, res: EvaluationResult, sandbox: Sandbox, problem_path: str, kernel_path: str,
         master: int, deadline: float, build_dir: str | None) -> None:
    ref, ker = _start(sandbox, problem_path, kernel_path, deadline, res)

    def kernel_fail(reply: dict[str, Any], stage: str) -> None:
        _merge_flags(res, reply)
        kind = reply.get("kind", "runtime_error")
        raise _Abort(kind, f"{reply.get('error')}" if stage != "build" else f"{reply.get('error')}",
                     reply.get("traceback", ""))

    def ref_fail(reply: dict[str, Any]) -> None:
        kind = reply.get("kind", "runtime_error")
        raise _Abort(kind if kind != "incorrect" else "runtime_error",
                     f"reference failed: {reply.get('error')}", reply.get("traceback", ""))

    def both(msg_ref: dict[str, Any], msg_ker: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        ref.send(msg_ref)
        ker.send(msg_ker)
        try:
            r_ker = ker.recv(deadline)
        except ChildError as exc:
            raise _Abort(exc.kind, exc.message) from exc
        try:
            r_ref = ref.recv(deadline + 30)
        except ChildError as exc:
            raise _Abort(exc.kind, "reference: " + exc.message) from exc
        return r_ref, r_ker

    # ---- build / load ----------------------------------------------------------------------
    init_seed = derive_seed(master, "init")
    t0 = time.monotonic()
    r_ref, r_ker = both({"op": "load", "init_seed": init_seed}, {"op": "load", "init_seed": init_seed})
    res.timings_s["load"] = round(time.monotonic() - t0, 4)
    if r_ref.get("ok"):
        res.environment.update(r_ref.get("environment", {}))
    if not r_ker.get("ok"):
        kernel_fail(r_ker, "build")
    if not r_ref.get("ok"):
        ref_fail(r_ref)
    res.compiled = True
    res.timings_s["build"] = round(float(r_ker.get("import_s", 0)) + float(r_ker.get("init_s", 0)), 4)
    _merge_flags(res, r_ker)
    if build_dir:
        try:
            with open(os.path.join(build_dir, ".kb_built"), "w") as fh:
                fh.write(f"{time.time()}\n")
        except OSError:
            pass

    # ---- correctness -------------------------------------------------------------------------
    # Each process makes its own inputs from the trial's seed. The kernel's outputs travel as a file
    # that the parent moves into the reference process's directory; the reference process (trusted
    # code, another uid) compares them on the device with its own outputs, which never leave it.
    t0 = time.monotonic()
    first_spot: list[list[float]] | None = None
    input_dependent = False
    fresh = "fresh_inputs" not in cfg.disable_defences
    scale_check = "scale_check" not in cfg.disable_defences
    out_dtypes: list[str] = []
    dep_seed = derive_seed(master, "dependence")
    for i in range(cfg.correctness_trials):
        seed = derive_seed(master, "correct", i if fresh else 0)
        msg = {"op": "correct", "seed": seed, "trial": i, "spot_seed": dep_seed}
        r_ref, r_ker = both(msg, msg)
        _merge_flags(res, r_ker)
        if not r_ker.get("ok"):
            kernel_fail(r_ker, "correct")
        if not r_ref.get("ok"):
            ref_fail(r_ref)
        try:
            name = sandbox.hand_over(ker, ref, str(r_ker.get("file", "")), f"kernel_out_{i}.pt")
        except (ChildError, OSError) as exc:
            raise _Abort("runtime_error", f"could not take the kernel's outputs: {exc}") from exc
        try:
            r_cmp = ref.request({"op": "compare", "file": name, "atol": cfg.atol, "rtol": cfg.rtol,
                                 "scale_check": scale_check}, deadline + 60)
        except ChildError as exc:
            raise _Abort(exc.kind, "reference: " + exc.message) from exc
        if not r_cmp.get("ok"):
            raise _Abort("incorrect" if r_cmp.get("kind") == "incorrect" else "runtime_error",
                         f"trial {i + 1}: {r_cmp.get('error')}", r_cmp.get("traceback", ""))
        cmp = r_cmp["comparison"]
        res.max_abs_diff = max(res.max_abs_diff or 0.0, float(cmp["max_abs_diff"]))
        res.max_rel_diff = max(res.max_rel_diff or 0.0, float(cmp["max_rel_diff"]))
        out_dtypes = list(r_ref.get("dtypes", []))
        if cmp["near_zero"]:
            res.add_flag("near_zero_reference", f"The reference output is tiny (max |ref| = {cmp['ref_max_abs']:.3g}); "
                                                "elementwise tolerances alone would accept a zero output.")
        spot = r_ref.get("spot", [])
        if first_spot is None:
            first_spot = spot
        elif not input_dependent:
            input_dependent = not spots_match(first_spot, spot, out_dtypes, cfg.atol, cfg.rtol)
        if not cmp["ok"]:
            res.timings_s["correctness"] = round(time.monotonic() - t0, 4)
            raise _Abort("incorrect", f"trial {i + 1}: {cmp['reason']}")
        res.trials_passed += 1
    if cfg.correctness_trials > 1 and fresh and not input_dependent:
        res.add_flag("input_independent_reference", "The reference output was the same for every trial's inputs; "
                                                    "a constant output would pass.")
    res.correct = True
    res.status = "correct"
    res.timings_s["correctness"] = round(time.monotonic() - t0, 4)
    if cfg.timing_trials == 0:
        return

    # ---- timing --------------------------------------------------------------------------------
    t0 = time.monotonic()
    _timing(cfg, res, ref, ker, master, deadline, out_dtypes)
    res.timings_s["timing"] = round(time.monotonic() - t0, 4)


def _timing(cfg: EvaluationConfig, res: EvaluationResult, ref: SandboxProcess, ker: SandboxProcess, master: int,
            deadline: float, out_dtypes: list[str]) -> None:
    fresh = "fresh_inputs" not in cfg.disable_defences

    def call(p: SandboxProcess, msg: dict[str, Any]) -> tuple[dict[str, Any], int]:
        w0 = time.perf_counter_ns()
        try:
            reply = p.request(msg, deadline if p is ker else deadline + 30)
        except ChildError as exc:
            raise _Abort(exc.kind, ("reference: " if p is ref else "") + exc.message) from exc
        wall = time.perf_counter_ns() - w0
        if not reply.get("ok"):
            if p is ker:
                _merge_flags(res, reply)
                raise _Abort(reply.get("kind", "runtime_error"), f"while timing: {reply.get('error')}",
                             reply.get("traceback", ""))
            raise _Abort("runtime_error", f"reference failed while timing: {reply.get('error')}")
        if p is ker:
            _merge_flags(res, reply)
        return reply, wall

    def seeds(tag: str, r: int, n: int) -> list[int]:
        return [derive_seed(master, tag, r, c) if fresh else derive_seed(master, "correct", 0) for c in range(n)]

    # Warm-up (both sides), also used to size the rounds and calibrate the host-clock overhead.
    warm = {"op": "time", "seeds": seeds("warm", 0, cfg.warmup_calls), "calibrate": True}
    w_ref, _ = call(ref, warm)
    w_ker, _ = call(ker, warm)
    t_ref = median(w_ref["times_ns"]) if w_ref["times_ns"] else 1e6
    t_ker = median(w_ker["times_ns"]) if w_ker["times_ns"] else 1e6
    per_call = max(t_ref, t_ker, 1.0)
    calls = int(max(1, min(cfg.max_calls_per_round, math.ceil(cfg.round_target_s * 1e9 / per_call))))
    null_host = median(w_ref["null_host_ns"]) if w_ref.get("null_host_ns") else 0.0

    ref_rounds: list[float] = []
    ker_rounds: list[float] = []
    ker_host_rounds: list[float] = []
    ref_over: list[float] = []
    ker_over: list[float] = []
    ker_walls: list[int] = []
    spot_mismatch: int | None = None
    check_spots = "timing_spot_check" not in cfg.disable_defences
    for r in range(cfg.timing_trials):
        msg = {"op": "time", "seeds": seeds("time", r, calls), "spot_seed": derive_seed(master, "spot", r)}
        order = (ref, ker) if r % 2 == 0 else (ker, ref)
        replies: dict[str, tuple[dict[str, Any], int]] = {}
        for p in order:
            replies[p.role] = call(p, msg)
        (rr, rwall), (kr, kwall) = replies["reference"], replies["kernel"]
        if len(kr.get("times_ns", [])) != calls or len(rr.get("times_ns", [])) != calls:
            raise _Abort("crashed", "kernel process returned a malformed timing reply")
        ref_rounds.append(median(rr["times_ns"]) / 1e6)
        ker_rounds.append(median(kr["times_ns"]) / 1e6)
        if cfg.device == "cuda":
            ker_host_rounds.append(max(0.0, median(kr["host_ns"]) - null_host) / 1e6)
        ref_over.append((rwall - sum(rr["times_ns"])) / calls / 1e6)
        ker_over.append((kwall - sum(kr["times_ns"])) / calls / 1e6)
        ker_walls.append(kwall)
        if check_spots and spot_mismatch is None and not spots_match(rr.get("spot", []), kr.get("spot", []),
                                                                      out_dtypes, cfg.atol, cfg.rtol):
            spot_mismatch = r

    if spot_mismatch is not None:
        res.add_flag("timing_output_mismatch", f"Outputs computed during timing round {spot_mismatch + 1} differ "
                                               "from the reference's for the same inputs (caching or replay).")
        res.correct = False
        res.status = "incorrect"
        res.error = f"outputs during timing round {spot_mismatch + 1} did not match the reference"
        return

    # GPU: work that outlives the timed stream shows as host time (over a device-wide sync) well
    # above the stream's event time.
    if cfg.device == "cuda" and ker_host_rounds:
        ev, host = median(ker_rounds), median(ker_host_rounds)
        if host > 1.25 * ev + 0.02:
            res.add_flag("side_stream_work", f"Host time over a device-wide synchronise ({host:.4f} ms) far exceeds "
                                             f"the stream's event time ({ev:.4f} ms): work ran outside the timed "
                                             "stream.")
            ker_rounds = [max(a, b) for a, b in zip(ker_rounds, ker_host_rounds, strict=False)]
            res.add_note("timing_from_host_clock", "Kernel times are host-clock times over a device-wide "
                                                   "synchronise, not stream events.")

    # Parent-clock cross-check: the kernel process's unaccounted time per call should match the
    # reference process's (both do the same input generation and bookkeeping).
    if "parent_clock" not in cfg.disable_defences:
        excess = median(ker_over) - median(ref_over)
        k_med = median(ker_rounds)
        slack = 0.25 + 0.5 * max(0.0, median(ref_over))
        if excess > 0.5 * k_med + slack:
            res.add_flag("timing_mismatch", f"The parent's clock saw {excess:.3f} ms per call more than the kernel "
                                            f"process reported ({k_med:.3f} ms per call).")
            ker_rounds = [(w / calls) / 1e6 - median(ref_over) for w in ker_walls]
            ker_rounds = [max(x, 1e-6) for x in ker_rounds]
            res.add_note("timing_from_parent_clock", "Kernel times were replaced by the parent's own clock.")

    total_calls = calls * cfg.timing_trials
    res.reference_ms = summary(ref_rounds, total_calls)
    res.kernel_ms = summary(ker_rounds, total_calls)
    res.reference_ms["calls_per_round"] = calls
    res.kernel_ms["calls_per_round"] = calls
    # Per-call time the parent saw beyond what each process reported (input generation, IPC, ...).
    res.reference_ms["unaccounted_ms"] = median(ref_over)
    res.kernel_ms["unaccounted_ms"] = median(ker_over)
    k_med = median(ker_rounds)
    res.speedup = median(ref_rounds) / k_med if k_med > 0 else math.inf
    if len(ref_rounds) >= 2:
        res.speedup_interval = bootstrap_speedup_ci(ref_rounds, ker_rounds, seed=derive_seed(master, "boot") % 2**32)
    else:
        res.speedup_interval = (res.speedup, res.speedup)
    lo, hi = res.speedup_interval
    if res.speedup and hi - lo > 0.2 * res.speedup:
        res.add_note("speedup_uncertain", f"The 95% interval of the speedup is wide ({lo:.3g}-{hi:.3g}).")
    if res.speedup is not None and res.speedup > cfg.speedup_flag_threshold:
        res.add_flag("excessive_speedup", f"Speedup {res.speedup:.2f}x exceeds the review threshold of "
                                          f"{cfg.speedup_flag_threshold:g}x.")


