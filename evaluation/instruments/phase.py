"""The instruments' phase of an evaluation: after the timed rounds, for a correct kernel only.

Each instrument runs in turn under the phase's own deadline (``instruments_budget_s``), so that a
kernel that hangs or dies here costs at most that and never changes the verdict. What a step could
not finish is recorded as skipped, with why, under each instrument it measures; where the kernel is
to blame (it raised, died or hung: a kernel that passed correctness and timing and fails only here
may be detecting the instruments) the ``instruments_failed`` flag sends it to reviewers. The later
steps still run where both processes are there and in step; else each is recorded as not run. A step
whose instruments were not asked for does not run. What they find goes to ``res.instruments`` and,
as flags, to ``res.flags``.

Order: the speed of light (reference only, no kernel code), two repeat runs on one seed (the
determinism check, and on the first the fp64 reference of the precision check), the profile, and
last the other shapes, which rebuild the models.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable
from typing import Any

from evaluation.instruments import determinism, precision, profile, roofline, sanitize, shapes
from evaluation.instruments.scope import surely_slower
from evaluation.phases.correctness import compare_trial
from evaluation.phases.problem_facts import FACTS, whole_sizes
from evaluation.phases.seeds import derive_seed
from evaluation.phases.session import Abort, Pair
from evaluation.results.hardware import hardware_slug
from evaluation.results.types import INSTRUMENTS
from evaluation.sandbox.host_errors import CARD_FULL, INFRASTRUCTURE_ERROR
from evaluation.sandbox.protocol import CorrectReply, CorrectRequest, InstrumentReply, InstrumentRequest
from evaluation.sandbox.sandbox import Sandbox

#: On a GPU, the fp64 reference is skipped when its copies (inputs, parameters, outputs) pass this.
FP64_GPU_BYTES = 16 * 2**30


def run_instruments(pair: Pair, sandbox: Sandbox) -> None:
    """Run the configured instruments (``cfg.instruments``) on a correct kernel."""
    cfg, res = pair.cfg, pair.res
    if not cfg.instruments or not res.correct:
        sanitize.finish(res.instruments)  # the tolerance's record, made before
        return
    slower = _surely_slower(pair)
    if slower:
        for m in sorted(cfg.instruments & INSTRUMENTS):
            res.instruments.setdefault(m, {"skipped": slower})
        sanitize.finish(res.instruments)
        return
    t0 = time.monotonic()
    sub = dataclasses.replace(pair, deadline=min(pair.deadline, t0 + cfg.instruments_budget_s))
    costs, paused = _run_steps(sub, sandbox)
    res.instruments["cost_s"] = costs
    if paused:
        res.timings_s["instruments_paused"] = round(paused, 4)
    sanitize.finish(res.instruments)
    res.timings_s["instruments"] = round(time.monotonic() - t0 - paused, 4)  # the GPU's time, not the wait


def _run_steps(sub: Pair, sandbox: Sandbox) -> tuple[dict[str, float], float]:
    """Each asked step under the phase's deadline; (seconds each took, seconds paused between them)."""
    costs: dict[str, float] = {}
    paused = 0.0
    gone: str | None = None  # why the later steps cannot run, once they cannot
    for name, measures in STEPS:
        asked = [m for m in measures if m in sub.cfg.instruments]
        if not asked:
            continue
        if gone is None and costs and sub.pause is not None:
            waited = sub.pause()  # another's evaluation may take the GPU here; the budget waits with it
            paused += waited
            sub = dataclasses.replace(sub, deadline=sub.deadline + waited)
        if gone is None and time.monotonic() >= sub.deadline:
            gone = "not run: the instruments' time budget was spent"
        if gone is not None:
            for m in asked:
                sub.res.instruments.setdefault(m, {"skipped": gone})
            continue
        t = time.monotonic()
        try:
            _STEP_FUNCS[name](sub, sandbox)
        except Abort as ab:
            _record_abort(sub, name, asked, ab, sub.deadline - t)
            if not _can_go_on(sub, ab):
                gone = f"not run: a process ended during the {LABELS[name]}"
        costs[name] = round(time.monotonic() - t, 4)
    return costs, paused


def _surely_slower(pair: Pair) -> str:
    """Why the instruments need not run (scope.surely_slower on the kernel's speedup and interval)."""
    return surely_slower(pair.cfg.instruments_min_speedup, pair.res.speedup, pair.res.speedup_interval)


def _record_abort(pair: Pair, step: str, asked: list[str], ab: Abort, left_s: float) -> None:
    """A step that ended early: each instrument it measures is recorded skipped, with the error (the
    kernel's own text, maybe: public pages leave it out); where the kernel is to blame, the
    ``instruments_failed`` flag sends it to reviewers (the verdict stands: docs/evaluation.md)."""
    res, status = pair.res, sanitize.kind(ab.status)  # a kernel's failed reply names its own kind
    for m in asked:
        res.instruments.setdefault(m, {"skipped": f"ended early: {status}", "error": ab.error[:400]})
    if not _kernels_fault(pair, ab, left_s):
        return
    if ab.kernel_side:
        how = "raised an error (its text is in the instruments' record, for reviewers)"
    elif ab.status == "timeout":
        how = "stopped answering"
    else:  # the harness's own words (the process died, broke the protocol)
        how = f"failed: {ab.error[:200]}"
    res.add_flag("instruments_failed", f"The kernel passed correctness and timing, then, during the {LABELS[step]} "
                                       f"of the instruments, {how} ({status}): {' and '.join(asked)} not "
                                       "measured. A kernel that fails only here may be detecting the instruments.")


def _kernels_fault(pair: Pair, ab: Abort, left_s: float) -> bool:
    """Whether an Abort of the instruments' phase is the kernel's doing, not the reference's or the host's."""
    if ab.kernel_side:
        return True  # the kernel's process replied with an error
    if ab.status == INFRASTRUCTURE_ERROR or ab.error.startswith(("reference", "the reference process")):
        return False
    # A timeout counts against the kernel only where the step had time for it: twice what the whole
    # correctness phase took (an honest kernel times out too when earlier steps spent the budget).
    return ab.status != "timeout" or left_s >= 2 * pair.res.timings_s.get("correctness", 0.0)


def _can_go_on(pair: Pair, ab: Abort) -> bool:
    """Whether the later steps can use the processes: both still run, and the failure was a reply
    (an error from the kernel's or the reference's code), so no reply is left unread."""
    replied = ab.kernel_side or ab.error.startswith(("reference failed", CARD_FULL))
    return replied and all(p.proc is not None and p.proc.poll() is None and not p.killed_reason
                           for p in (pair.ref, pair.ker))


def _speed_of_light(pair: Pair, sandbox: Sandbox) -> None:
    cfg, res = pair.cfg, pair.res
    work = _reference_work(pair)
    res.environment["param_mb"] = round(int(work.get("param_bytes", 0)) / 2**20, 1)
    peaks = roofline.peaks_for(hardware_slug(str(res.environment.get("device_name", "")), cfg.device), cfg.peaks)
    if peaks is None and cfg.device == "cpu":
        peaks = _cpu_peaks(pair)
    ker = (res.kernel_ms or {}).get("median")
    ref = (res.reference_ms or {}).get("median")
    record, flag = roofline.assess(work, ker, ref, peaks)
    res.instruments["speed_of_light"] = record
    if flag:
        res.add_flag("impossible_speed", flag)


def _reference_work(pair: Pair) -> dict[str, Any]:
    """The bytes of one forward at the run's precision, counted by the reference process once per
    problem in this process (``problem_facts``)."""
    what = f"work/{pair.cfg.precision}"
    kept = FACTS.get(pair, what)
    if kept is not None and whole_sizes(kept):
        return kept
    r = pair.request(pair.ref, InstrumentRequest(what="work"), InstrumentReply)
    if not r.ok:
        raise pair.reference_failed(r, "reference failed counting its work: ")
    FACTS.put(pair, what, dict(r.data))
    return r.data


def _cpu_peaks(pair: Pair) -> dict[str, float] | None:
    """The host's CPU bandwidth, measured once per host by the reference process (roofline.cpu_peaks)."""
    def measure() -> float:
        r = pair.request(pair.ref, InstrumentRequest(what="bandwidth"), InstrumentReply)
        if not r.ok:
            raise pair.reference_failed(r, "reference failed measuring the host's bandwidth: ")
        value = r.data.get("bytes_per_s")
        return float(value) if isinstance(value, (int, float)) else 0.0

    cores = len(pair.cfg.cpus) if pair.cfg.cpus else (os.cpu_count() or 1)
    return roofline.cpu_peaks(pair.cfg.build_cache_dir, str(pair.res.environment.get("device_name", "")), cores, measure)


def _fp64_fits(pair: Pair) -> bool:
    """Whether the fp64 copies of inputs, parameters and outputs fit (CPU: a quarter of the memory limit)."""
    env = pair.res.environment
    mb = sum(float(env.get(k) or 0.0) for k in ("input_mb", "output_mb", "param_mb"))
    if pair.cfg.device == "cpu":
        return 2 * mb <= pair.cfg.memory_limit_mb / 4
    return 2 * mb * 2**20 <= FP64_GPU_BYTES


def _repeat_runs(pair: Pair, sandbox: Sandbox) -> None:
    """Determinism (two runs on one seed, digests compared) and, on the first, the fp64 reference."""
    cfg, res = pair.cfg, pair.res
    want_det = "determinism" in cfg.instruments
    want_fp64 = "precision" in cfg.instruments
    if want_fp64 and cfg.precision != "fp32":
        res.instruments["precision"] = {"skipped": f"the run's precision is {cfg.precision}"}
        want_fp64 = False
    elif want_fp64 and not _fp64_fits(pair):
        res.instruments["precision"] = {"skipped": "the float64 copies would not fit the memory budget"}
        want_fp64 = False
    if not (want_det or want_fp64):
        return  # the precision check's reason is recorded above; no run
    seed = derive_seed(pair.master, "instruments")
    runs: list[tuple[Any, Any]] = []
    for k in range(2 if want_det else 1):
        runs.append(_run_once(pair, sandbox, seed, 1000 + k, fingerprint=want_det, fp64=want_fp64 and k == 0))
    wrong = [c for c, _ in runs if not c.ok]
    if wrong:  # a fresh trial at the problem's own sizes: the verdict stands, reviewers are told
        res.add_flag("instruments_failed", f"The kernel passed correctness and timing, then failed a repeat run of the "
                                           f"instruments on fresh inputs at the problem's own sizes: {wrong[0].reason}")
    if want_fp64:
        _judge_precision(pair, runs[0][1].fp64)
    if want_det:
        record, flag = determinism.judge(runs[0][1].fingerprint, runs[1][1].fingerprint,
                                         (runs[0][0].max_abs_diff, runs[1][0].max_abs_diff))
        record["correct"] = [bool(c.ok) for c, _ in runs]
        res.instruments["determinism"] = record
        if flag:
            res.add_flag("nondeterministic", flag)


def _run_once(pair: Pair, sandbox: Sandbox, seed: int, trial: int, fingerprint: bool, fp64: bool) -> tuple[Any, Any]:
    """One forward of both sides on ``seed``, compared (with the kernel outputs' ``fingerprint`` and
    their errors against an ``fp64`` reference, as asked)."""
    r_ref, r_ker = pair.both(CorrectRequest(seed=seed, trial=trial), CorrectReply)
    pair.merge_flags(r_ker)
    if not r_ker.ok:
        raise pair.kernel_failed(r_ker)
    if not r_ref.ok:
        raise pair.reference_failed(r_ref)
    return compare_trial(pair, sandbox, r_ker, trial, fingerprint=fingerprint, fp64=fp64)


def _judge_precision(pair: Pair, errors: dict[str, Any]) -> None:
    r_ref, r_ker = pair.both(InstrumentRequest(what="modes"), InstrumentReply)
    record, flag = precision.judge(errors, r_ker.data if r_ker.ok else {}, r_ref.data if r_ref.ok else {})
    pair.res.instruments["precision"] = record
    if flag:
        pair.res.add_flag("precision_downgrade", flag)


#: Flags that describe the problem's reference, not what the kernel did: they send no kernel to a profile.
REFERENCE_FLAGS = frozenset({"near_zero_reference", "input_independent_reference", "nondeterministic_reference",
                             "non_finite_reference"})


def _profile_unasked(pair: Pair) -> str:
    """Why the GPU profile is not taken: it is for the kernels a reviewer will open (flagged, or
    faster than the review threshold). The profiler's first start in a process holds the GPU about
    5 s, most of what the instruments cost; every timed kernel's GPU busy share is in its device-time
    figure already (``EvaluationResult.device``)."""
    res, cfg = pair.res, pair.cfg
    accusing = [f for f in res.flag_codes if f not in REFERENCE_FLAGS]
    if cfg.device != "cuda" or accusing or (res.speedup or 0.0) > cfg.speedup_flag_threshold:
        return ""
    return "not run: nothing sends this kernel to review (its GPU busy share is in its device-time figure)"


def _profile(pair: Pair, sandbox: Sandbox) -> None:
    if pair.cfg.device == "cpu" and "cpu_profile" not in pair.cfg.instruments:
        pair.res.instruments["profile"] = {"skipped": "GPU only (on the CPU with the cpu_profile instrument)"}
        return
    unasked = _profile_unasked(pair)
    if unasked:
        pair.res.instruments["profile"] = {"skipped": unasked}
        return
    seed = derive_seed(pair.master, "profile")
    r_ref, r_ker = pair.both(InstrumentRequest(what="profile", seed=seed), InstrumentReply)
    if not r_ker.ok:
        raise pair.kernel_failed(r_ker, "while profiling: ")
    if not r_ref.ok:
        raise pair.reference_failed(r_ref, "reference failed while profiling: ")
    # Each side's reply rebuilt from an allow-list: the kernel's process may reply anything (sanitize).
    pair.res.instruments["profile"] = {"device": pair.cfg.device, "kernel": profile.clean(r_ker.data),
                                       "reference": profile.clean(r_ref.data)}


def _other_shapes(pair: Pair, sandbox: Sandbox) -> None:
    res = pair.res
    r = pair.request(pair.ref, InstrumentRequest(what="size_constants"), InstrumentReply)
    if not r.ok:
        raise pair.reference_failed(r, "reference failed listing its sizes: ")
    sizes = {str(k): int(v) for k, v in r.data.items() if type(v) is int}
    record: dict[str, Any] = {"sizes": sizes, "variants": []}
    res.instruments["shapes"] = record
    if not sizes:
        record["skipped"] = "the problem exposes no size constants that get_inputs/get_init_inputs read"
        return
    for j, (label, new) in enumerate(shapes.variants(sizes)):
        result, go_on = _one_shape(pair, sandbox, j, new)
        record["variants"].append({"label": label, "sizes": new, **result})
        if not go_on:
            break
    flag = shapes.judge(record["variants"])
    record["specialised"] = flag is not None
    if flag:
        res.add_flag("shape_specialised", flag)


def _one_shape(pair: Pair, sandbox: Sandbox, j: int, sizes: dict[str, int]) -> tuple[dict[str, Any], bool]:
    """One variant: ({"verdict", "detail"}, whether the processes are still there for the next)."""
    try:
        r_ref, r_ker = pair.both(InstrumentRequest(what="sizes", sizes=sizes), InstrumentReply)
        if not r_ref.ok:
            return {"verdict": "not_applicable", "detail": f"the reference fails at these sizes: {r_ref.error}"}, True
        if not r_ker.ok:
            return {"verdict": "failed", "detail": "ModelNew could not be built", "error": r_ker.error[:300]}, True
        trial = 1100 + j
        seed = derive_seed(pair.master, "shapes", j)
        c_ref, c_ker = pair.both(CorrectRequest(seed=seed, trial=trial), CorrectReply)
        pair.merge_flags(c_ker)
        if not c_ref.ok:
            return {"verdict": "not_applicable", "detail": f"the reference fails at these sizes: {c_ref.error}"}, True
        if not c_ker.ok:
            return {"verdict": "failed", "detail": f"its forward failed ({sanitize.kind(c_ker.kind)})", "error": c_ker.error[:300]}, True
        cmp, _ = compare_trial(pair, sandbox, c_ker, trial)
    except Abort as ab:
        side = "not_applicable" if ab.error.startswith("reference") else "failed"
        return {"verdict": side, "detail": f"ended early ({sanitize.kind(ab.status)})", "error": ab.error[:300]}, False
    if cmp.ok:
        return {"verdict": "correct", "detail": f"max abs diff {cmp.max_abs_diff:.3g}"}, True
    return {"verdict": "incorrect", "detail": str(cmp.reason)[:300]}, True


#: The steps in order, each with the instruments it measures: a step runs when one of them is asked for.
STEPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("speed_of_light", ("speed_of_light",)), ("repeat", ("determinism", "precision")), ("profile", ("profile",)),
    ("shapes", ("shapes",)))
_STEP_FUNCS: dict[str, Callable[[Pair, Sandbox], None]] = {
    "speed_of_light": _speed_of_light, "repeat": _repeat_runs, "profile": _profile, "shapes": _other_shapes}
LABELS: dict[str, str] = {"speed_of_light": "speed of light", "repeat": "repeat runs", "profile": "profile",
                          "shapes": "other shapes"}
