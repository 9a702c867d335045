"""The pure scoring of board rows (leaderboard.boards.scoring): KernelBench's rules, and the
fast_p intervals equal to evaluation.metrics.bootstrap_interval."""

from __future__ import annotations

import math

import pytest

from evaluation.metrics import bootstrap_interval
from leaderboard.boards import scoring
from leaderboard.boards.scoring import KernelFacts, level_score, mark_ties, summary


def facts(problem, sample=0, *, correct=True, speedup=1.5, compiled=True, excluded=False):
    return KernelFacts(problem, sample, compiled, correct, speedup if correct else None, excluded=excluded)


def test_sample_0_counts_and_a_missing_sample_0_is_a_failure():
    score = level_score([facts(1, 0, speedup=0.5), facts(1, 1, speedup=3.0), facts(2, 1, speedup=2.0)])
    row = summary(score, 4)
    assert row["attempted"] == 1 and row["correct_rate"] == 1 / 4 and row["fast_1"] == 0
    assert row["best_correct_rate"] == 2 / 4 and row["best_fast_1"] == 2 / 4 and row["best_fast_2"] == 1 / 4


def test_fast_p_and_geomean_match_kernelbench_score_py():
    # score.py: fastp = sum(speedup > p over correct) / n; geomean over correct samples only
    speedups = [2.0, 0.5, 1.0]
    score = level_score([facts(i, speedup=s) for i, s in enumerate(speedups)] + [facts(9, correct=False)])
    row = summary(score, 5, ps=(0.5, 1.0))
    assert row["fast_0.5"] == 2 / 5 and row["fast_1"] == 1 / 5 and row["fast_0"] == 3 / 5
    assert row["geomean_speedup"] == pytest.approx(math.prod(speedups) ** (1 / 3))


def test_correct_without_baseline_counts_in_fast_0_only():
    row = summary(level_score([facts(1, speedup=None), facts(2, speedup=1.5)]), 2)
    assert row["correct_rate"] == 1.0 and row["unscored"] == 1 and row["fast_0.5"] == 0.5


def test_pass_at_1_averages_each_problems_share_of_correct_samples():
    score = level_score([facts(1, 0), facts(1, 1, correct=False), facts(2, 0, correct=False)])
    assert summary(score, 4)["pass_at_1"] == pytest.approx(0.5 / 4)


def test_excluded_kernels_leave_unless_asked():
    kernels = [facts(1, excluded=True, speedup=3.0), facts(2, speedup=1.2)]
    assert summary(level_score(kernels), 2)["fast_1"] == 0.5
    assert summary(level_score(kernels, include_excluded=True), 2)["fast_1"] == 1.0
    assert level_score(kernels).excluded == 1


@pytest.mark.parametrize("n", [1, 7, 20, 100])
def test_the_interval_is_bootstrap_interval_over_problems(n):
    for count in sorted({0, 1, n // 3, n // 2, n - 1, n}):
        data = [1] * count + [0] * (n - count)
        expected = bootstrap_interval(data, lambda xs: sum(xs) / len(xs), n_resamples=scoring.INTERVAL_RESAMPLES)
        assert scoring.fast_p_interval(count, n) == pytest.approx(expected, abs=1e-12)


def test_rows_whose_intervals_overlap_the_row_above_are_tied():
    assert mark_ties([(0.5, 0.7), (0.4, 0.6), (0.1, 0.3), (0.2, 0.35)]) == [False, True, False, True]


def test_all_levels_merge_their_levels_as_a_fold_of_every_entry_would_but_for_pass_at_1():
    """scoring.merge: what the re-scoring stores for all levels without reading the levels' entries.
    Every count and speedup as a fold of all entries; pass@1's sum the fsum of the levels' sums."""
    by_level = {
        1: [facts(1, 0, speedup=0.5), facts(1, 1, speedup=3.0), facts(2, 0, correct=False), facts(3, 1, speedup=0.1)],
        2: [facts(10, 0, speedup=7.0), facts(10, 1, correct=False), facts(11, 0, speedup=None)],
        3: [facts(20, 0, speedup=1.1, excluded=True), facts(20, 2, speedup=1.3)],
    }
    everything = level_score([k for kernels in by_level.values() for k in kernels])
    merged = scoring.all_levels_score(by_level)
    for rule in ("sample0", "best", "published"):
        got, want = getattr(merged, rule), getattr(everything, rule)
        assert (got.attempted, got.compiled, got.correct, got.unscored) == (
            want.attempted,
            want.compiled,
            want.correct,
            want.unscored,
        )
        assert got.speedups.tobytes() == want.speedups.tobytes() and got.log_sum == want.log_sum
    assert (merged.kernels, merged.excluded, merged.measured) == (everything.kernels, everything.excluded, 0)
    levels = [level_score(kernels) for kernels in by_level.values()]
    assert merged.pass_at_1_sum == math.fsum(level.pass_at_1_sum for level in levels)
    assert merged.pass_at_1_sum == pytest.approx(everything.pass_at_1_sum, rel=1e-15)
    assert scoring.merge(reversed(levels)).pass_at_1_sum == merged.pass_at_1_sum
    assert merged.problems == {}
