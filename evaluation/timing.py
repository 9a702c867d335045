"""Phase 4 of an evaluation: time reference and kernel in alternating rounds, then cross-check.

Warm-up (both sides) sizes the rounds and calibrates the host-clock overhead of an empty timed
region. Each round asks one process, then the other, for the same number of timed calls on the
same fresh inputs; which side goes first alternates. The parent times every request with its own
clock, and the last call of each round returns output values at seeded positions, compared with
the reference's (a mismatch makes the kernel incorrect).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

from .compare import spots_match
from .protocol import TimeReply
from .sandbox import SandboxProcess
from .seeds import derive_seed
from .session import Abort, Pair
from .stats import bootstrap_speedup_ci, median, summary


@dataclass
class Rounds:
    """Per-round figures (ms), and the first round whose spot check failed."""

    calls: int
    ref: list[float] = field(default_factory=list)
    ker: list[float] = field(default_factory=list)
    ker_host: list[float] = field(default_factory=list)
    ref_over: list[float] = field(default_factory=list)
    ker_over: list[float] = field(default_factory=list)
    ker_walls: list[int] = field(default_factory=list)
    spot_mismatch: int | None = None


def measure(pair: Pair, out_dtypes: list[str]) -> None:
    """Time both sides and fill ``speedup``, its interval, ``kernel_ms``/``reference_ms`` and flags."""
    t0 = time.monotonic()
    calls, null_host = _warm_up(pair)
    rounds = _run_rounds(pair, calls, null_host, out_dtypes)
    if rounds.spot_mismatch is not None:
        _mark_mismatch(pair, rounds.spot_mismatch)
    else:
        _check_side_streams(pair, rounds)
        _check_parent_clock(pair, rounds)
        _report(pair, rounds)
    pair.res.timings_s["timing"] = round(time.monotonic() - t0, 4)


def _call(pair: Pair, p: SandboxProcess, msg: dict[str, object]) -> tuple[TimeReply, int]:
    reply, wall = pair.timed_request(p, msg, TimeReply)
    if p is pair.ker:
        if not reply.ok:
            raise pair.kernel_failed(reply, "while timing: ")
        pair.merge_flags(reply)
    elif not reply.ok:
        raise Abort("runtime_error", f"reference failed while timing: {reply.error}")
    return reply, wall


def _seeds(pair: Pair, tag: str, r: int, n: int) -> list[int]:
    if not pair.defence_on("fresh_inputs"):
        return [derive_seed(pair.master, "correct", 0)] * n
    return [derive_seed(pair.master, tag, r, c) for c in range(n)]


def _warm_up(pair: Pair) -> tuple[int, float]:
    """Warm both sides; return (calls per round, host-clock overhead of an empty timed region, ns)."""
    cfg = pair.cfg
    warm = {"op": "time", "seeds": _seeds(pair, "warm", 0, cfg.warmup_calls), "calibrate": True}
    w_ref, _ = _call(pair, pair.ref, warm)
    w_ker, _ = _call(pair, pair.ker, warm)
    t_ref = median(w_ref.times_ns) if w_ref.times_ns else 1e6
    t_ker = median(w_ker.times_ns) if w_ker.times_ns else 1e6
    per_call = max(t_ref, t_ker, 1.0)
    calls = int(max(1, min(cfg.max_calls_per_round, math.ceil(cfg.round_target_s * 1e9 / per_call))))
    null_host = median(w_ref.null_host_ns) if w_ref.null_host_ns else 0.0
    return calls, null_host


def _run_rounds(pair: Pair, calls: int, null_host: float, out_dtypes: list[str]) -> Rounds:
    cfg = pair.cfg
    rounds = Rounds(calls)
    check_spots = pair.defence_on("timing_spot_check")
    for r in range(cfg.timing_trials):
        msg = {"op": "time", "seeds": _seeds(pair, "time", r, calls), "spot_seed": derive_seed(pair.master, "spot", r)}
        first, second = (pair.ref, pair.ker) if r % 2 == 0 else (pair.ker, pair.ref)
        replies = {first.role: _call(pair, first, msg), second.role: _call(pair, second, msg)}
        (rr, rwall), (kr, kwall) = replies["reference"], replies["kernel"]
        if len(kr.times_ns) != calls or len(rr.times_ns) != calls:
            raise Abort("crashed", "kernel process returned a malformed timing reply")
        rounds.ref.append(median(rr.times_ns) / 1e6)
        rounds.ker.append(median(kr.times_ns) / 1e6)
        if cfg.device == "cuda":
            rounds.ker_host.append(max(0.0, median(kr.host_ns) - null_host) / 1e6)
        rounds.ref_over.append((rwall - sum(rr.times_ns)) / calls / 1e6)
        rounds.ker_over.append((kwall - sum(kr.times_ns)) / calls / 1e6)
        rounds.ker_walls.append(kwall)
        if check_spots and rounds.spot_mismatch is None and not spots_match(rr.spot, kr.spot, out_dtypes,
                                                                           cfg.atol, cfg.rtol):
            rounds.spot_mismatch = r
    return rounds


def _mark_mismatch(pair: Pair, r: int) -> None:
    res = pair.res
    res.add_flag("timing_output_mismatch", f"Outputs computed during timing round {r + 1} differ "
                                           "from the reference's for the same inputs (caching or replay).")
    res.correct = False
    res.status = "incorrect"
    res.error = f"outputs during timing round {r + 1} did not match the reference"


def _check_side_streams(pair: Pair, rounds: Rounds) -> None:
    """GPU: work that outlives the timed stream shows as host time (over a device-wide sync) well
    above the stream's event time; kernel times are then the host times."""
    if pair.cfg.device != "cuda" or not rounds.ker_host:
        return
    ev, host = median(rounds.ker), median(rounds.ker_host)
    if host > 1.25 * ev + 0.02:
        pair.res.add_flag("side_stream_work", f"Host time over a device-wide synchronise ({host:.4f} ms) far "
                                              f"exceeds the stream's event time ({ev:.4f} ms): work ran outside "
                                              "the timed stream.")
        rounds.ker = [max(a, b) for a, b in zip(rounds.ker, rounds.ker_host, strict=False)]
        pair.res.add_note("timing_from_host_clock", "Kernel times are host-clock times over a device-wide "
                                                    "synchronise, not stream events.")


def _check_parent_clock(pair: Pair, rounds: Rounds) -> None:
    """The kernel process's unaccounted time per call should match the reference process's (both do
    the same input generation and bookkeeping); if not, the kernel's times are the parent's."""
    if not pair.defence_on("parent_clock"):
        return
    excess = median(rounds.ker_over) - median(rounds.ref_over)
    k_med = median(rounds.ker)
    slack = 0.25 + 0.5 * max(0.0, median(rounds.ref_over))
    if excess > 0.5 * k_med + slack:
        pair.res.add_flag("timing_mismatch", f"The parent's clock saw {excess:.3f} ms per call more than the "
                                             f"kernel process reported ({k_med:.3f} ms per call).")
        ref_over = median(rounds.ref_over)
        rounds.ker = [max((w / rounds.calls) / 1e6 - ref_over, 1e-6) for w in rounds.ker_walls]
        pair.res.add_note("timing_from_parent_clock", "Kernel times were replaced by the parent's own clock.")


def _report(pair: Pair, rounds: Rounds) -> None:
    cfg, res = pair.cfg, pair.res
    total_calls = rounds.calls * cfg.timing_trials
    res.reference_ms = summary(rounds.ref, total_calls)
    res.kernel_ms = summary(rounds.ker, total_calls)
    for side, over in ((res.reference_ms, rounds.ref_over), (res.kernel_ms, rounds.ker_over)):
        side["calls_per_round"] = rounds.calls
        # Per-call time the parent saw beyond what the process reported (input generation, IPC, ...).
        side["unaccounted_ms"] = median(over)
    k_med = median(rounds.ker)
    res.speedup = median(rounds.ref) / k_med if k_med > 0 else math.inf
    if len(rounds.ref) >= 2:
        res.speedup_interval = bootstrap_speedup_ci(rounds.ref, rounds.ker,
                                                    seed=derive_seed(pair.master, "boot") % 2**32)
    else:
        res.speedup_interval = (res.speedup, res.speedup)
    lo, hi = res.speedup_interval
    if res.speedup and hi - lo > 0.2 * res.speedup:
        res.add_note("speedup_uncertain", f"The 95% interval of the speedup is wide ({lo:.3g}-{hi:.3g}).")
    if res.speedup is not None and res.speedup > cfg.speedup_flag_threshold:
        res.add_flag("excessive_speedup", f"Speedup {res.speedup:.2f}x exceeds the review threshold of "
                                          f"{cfg.speedup_flag_threshold:g}x.")
