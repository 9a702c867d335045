"""Work a kernel leaves running while the reference is timed (evaluation.phases.timing), on made-up rounds."""

from __future__ import annotations

from evaluation.phases import timing
from tests.unit.test_parent_clock import _pair, _rounds, codes


def _watched(rounds: timing.Rounds, ker_cpu_s: float, ref_wall_s: float, ref_cpu_s: float) -> timing.Rounds:
    rounds.ker_cpu_meanwhile_s, rounds.ref_wall_s, rounds.ref_cpu_s = ker_cpu_s, ref_wall_s, ref_cpu_s
    return rounds


def test_a_spinning_thread_is_caught_on_a_host_loaded_by_others():
    # Others' work took most of the shared core: the reference got 0.10 s of CPU in 0.30 s, and the
    # kernel's spinning thread about half as much (under the former 10%-of-wall-plus-0.05 s bar).
    pair = _pair()
    assert timing._check_background_work(pair, _watched(_rounds(0.2, 0.2), 0.06, 0.30, 0.10))
    assert "background_cpu_work" in codes(pair)


def test_an_idle_kernel_process_is_not_accused():
    pair = _pair()
    assert not timing._check_background_work(pair, _watched(_rounds(0.2, 0.2), 0.02, 0.30, 0.10))
    assert not codes(pair)


def test_when_both_apply_the_flag_names_the_background_work():
    # A spinning thread also slows the kernel's own harness between calls: the parent sees hidden
    # time. The figures take the parent's clock; the accusation is the specific one.
    pair, rounds = _pair(), _watched(_rounds(0.02, 0.2), 0.2, 0.30, 0.25)
    timing._check_parent_clock(pair, rounds, background=timing._check_background_work(pair, rounds))
    assert codes(pair) == {"background_cpu_work"}
    assert all(abs(k - 0.2) < 1e-6 for k in rounds.ker)
    assert "timing_from_parent_clock" in {n["code"] for n in pair.res.notes}
