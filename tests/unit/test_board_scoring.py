"""The pure scoring of board rows (leaderboard.boards.scoring): KernelBench's rules, and the
fast_p intervals equal to evaluation.results.metrics.bootstrap_interval."""

from __future__ import annotations

import math
import random

import pytest

from evaluation.results.metrics import bootstrap_interval
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


def _random_entry(rng, problem: int) -> list:
    """One problem's entry from 1-4 random kernels (failed, unscored, scored, published, flagged...)."""
    kernels = []
    for sample in rng.sample(range(4), rng.randint(1, 4)):
        correct = rng.random() < 0.6
        speedup = rng.choice([None, 0.7, 1.25, 2.0, round(rng.uniform(0.1, 9), 3)]) if correct else None
        published = rng.choice([None, None, 1.37, 2.0, 0.8])
        kernels.append(
            KernelFacts(
                problem, sample, rng.random() < 0.8, correct, speedup, rng.random() < 0.2, rng.random() < 0.2,
                rng.random() < 0.1, rng.random() < 0.5, published, rng.choice(["", "L40S", "A100"]) if published else "",
            )
        )  # fmt: skip
    return scoring.problem_entry(kernels, include_excluded=rng.random() < 0.5)


def _stored(score: scoring.LevelScore) -> tuple:
    """What the read model stores of a score (its entries aside), bit for bit."""
    tallies = (score.sample0, score.best, score.published)
    return (
        [(t.attempted, t.compiled, t.correct, t.unscored, t.speedups.tobytes(), t.log_sum) for t in tallies],
        score.pass_at_1_sum, score.kernels, score.flagged, score.unreviewed, score.excluded, score.measured,
        score.published_on,
    )  # fmt: skip


@pytest.mark.parametrize("seed", range(40))
def test_a_patch_by_old_and_new_entries_equals_the_fold_to_the_bit(seed):
    """The re-scorer's patch (leaderboard/boards/patches.py): a level's stored fold with some
    problems' entries replaced, added or removed, from the old and new entries and the Rest of the
    level, equals the fold of the new entries; and so does all levels' merge of it."""
    rng = random.Random(seed)
    levels = [{p: _random_entry(rng, p) for p in range(100 * n, 100 * n + rng.randint(1, 12))} for n in (1, 2)]
    before = [scoring.fold(dict(entries)) for entries in levels]
    entries = levels[0]
    changed = rng.sample(sorted(entries), rng.randint(1, min(3, len(entries))))
    old = [entries[p] for p in changed]
    rest = scoring.rest_of(e for p, e in entries.items() if p not in changed)
    new = {p: _random_entry(rng, p) for p in changed if rng.random() < 0.85}  # the others lose every kernel
    new.update({999: _random_entry(rng, 999)} if rng.random() < 0.3 else {})  # a problem new to the level
    after = {p: e for p, e in entries.items() if p not in changed} | new
    if not after:
        return
    patched = scoring.patch(before[0], old, list(new.values()), rest)
    assert _stored(patched) == _stored(scoring.fold(after))
    remerged = scoring.merge([patched, before[1]])
    assert _stored(remerged) == _stored(scoring.merge([scoring.fold(after), before[1]]))
