"""The parent's clock bounds what the kernel's process reports (evaluation.timing), on made-up rounds."""

from __future__ import annotations

import types

from evaluation import timing
from evaluation.types import EvaluationResult


def _pair(device: str = "cpu") -> types.SimpleNamespace:
    return types.SimpleNamespace(cfg=types.SimpleNamespace(device=device), res=EvaluationResult(status="correct"),
                                 defence_on=lambda name: True)


def _rounds(reported_ms: float, true_ms: float, over_ms: float = 0.1, calls: int = 20, n: int = 8) -> timing.Rounds:
    """Rounds where each call took ``true_ms`` plus ``over_ms`` of bookkeeping in both processes,
    and the kernel's process reported ``reported_ms``."""
    wall = int(calls * (true_ms + over_ms) * 1e6)
    return timing.Rounds(calls=calls, ref=[1.0] * n, ker=[reported_ms] * n, ref_over=[over_ms] * n,
                         ker_over=[(wall / 1e6 - calls * reported_ms) / calls] * n, ker_walls=[wall] * n)


def codes(pair) -> set[str]:
    return set(pair.res.flag_codes)


def test_an_honest_report_is_kept():
    pair, rounds = _pair(), _rounds(0.2, 0.2)
    timing._check_parent_clock(pair, rounds)
    assert rounds.ker == [0.2] * 8 and not codes(pair) and not pair.res.notes


def test_a_report_below_the_parents_clock_takes_the_parents_figure():
    pair, rounds = _pair(), _rounds(0.02, 0.2)
    timing._check_parent_clock(pair, rounds)
    assert "timing_mismatch" in codes(pair)
    assert all(abs(k - 0.2) < 1e-6 for k in rounds.ker)


def test_the_allowance_does_not_grow_with_what_the_kernel_reports():
    # The same 0.1 ms hidden per call, whether the kernel reports 0.05 ms or 50 ms: both caught
    # (the former rule allowed half the reported time, so the 50 ms report hid 0.1 ms unseen).
    for reported in (0.05, 50.0):
        pair, rounds = _pair(), _rounds(reported, reported + 0.1)
        timing._check_parent_clock(pair, rounds)
        assert "timing_mismatch" in codes(pair), reported
    _, _, margin = timing.parent_bound(_rounds(50.0, 50.1), "cpu")
    assert margin == timing.parent_bound(_rounds(0.05, 0.15), "cpu")[2]


def test_a_lie_in_a_few_rounds_gains_nothing_and_is_noted_not_flagged():
    pair, rounds = _pair(), _rounds(0.2, 0.2)
    rounds.ker[0] = 0.01  # one round reports a twentieth of its time
    rounds.ker_over[0] += 0.19
    timing._check_parent_clock(pair, rounds)
    assert "timing_mismatch" not in codes(pair) and abs(rounds.ker[0] - 0.2) < 1e-6
    assert [n["code"] for n in pair.res.notes] == ["timing_from_parent_clock"]


def test_a_noisy_reference_widens_the_allowance_and_a_quiet_one_does_not():
    # A loaded host: the reference's own per-call overhead moves by 0.2 ms from round to round, and
    # an honest kernel's rounds (same work, same bookkeeping) hide 0.12 ms more than the reference's
    # median; the rounds' own spread covers it. On a quiet host the same 0.12 ms is a lie.
    over = [0.1, 0.3, 0.1, 0.3, 0.1, 0.3, 0.1, 0.3]
    noisy = _rounds(0.2, 0.2)
    noisy.ref_over = over
    noisy.ker_over = [0.2 + 0.12] * 8
    pair = _pair()
    timing._check_parent_clock(pair, noisy)
    assert "timing_mismatch" not in codes(pair), timing.parent_bound(noisy, "cpu")[2]
    quiet = _rounds(0.2, 0.2, over_ms=0.2)
    quiet.ker_over = [0.2 + 0.12] * 8
    pair = _pair()
    timing._check_parent_clock(pair, quiet)
    assert "timing_mismatch" in codes(pair)
