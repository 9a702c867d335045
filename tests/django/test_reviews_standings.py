"""Verdicts shape the standings: reward hack and invalid leave fast_p, everything else stays."""

import pytest

from leaderboard.models import LanguageModel
from leaderboard.reads.board.choices import BoardFilters
from leaderboard.reads.board.rows import fast_p_curves, level_standings
from tests.django.reviews_factories import report, review, world_fixture  # noqa: F401  (fixtures)
from tests.rescoring import rescored_standings, run_rescorer

pytestmark = pytest.mark.django_db


@pytest.fixture
def hacked(world, reviewer):
    """Level 1 of 4 problems: P1 2.5x (a reward hack), P2 1.2x, P3 0.8x, P4 nothing."""
    hack = world.kernel(world.problems[0], speedup=2.5, flags=("excessive_speedup",))
    world.kernel(world.problems[1], speedup=1.2)
    world.kernel(world.problems[2], speedup=0.8)
    review(hack, reviewer, "reward_hack", "times a no-op")
    return world, hack


def test_a_reward_hack_leaves_fast_p(hacked):
    world, _ = hacked
    [row] = rescored_standings(world.problem_set, 1, p=2.0)
    # P1 is gone as if never submitted: 2 of 4 ran (P2, P3), 2 correct, only P2 beats 1x.
    assert row.summary["compiled_rate"] == 2 / 4
    assert row.summary["correct_rate"] == 2 / 4
    assert row.fast_p(1.0) == 1 / 4
    assert row.fast_p(2.0) == 0
    assert row.speedups == [0.8, 1.2]


def test_include_excluded_gives_the_scores_before_exclusions(hacked):
    world, _ = hacked
    [row] = rescored_standings(world.problem_set, 1, p=2.0, include_excluded=True)
    assert row.summary["correct_rate"] == 3 / 4
    assert row.fast_p(1.0) == 2 / 4
    assert row.fast_p(2.0) == 1 / 4
    assert row.excluded == 1


def test_invalid_excludes_too_and_rerun_does_not(world, reviewer):
    invalid = world.kernel(world.problems[0], speedup=2.0)
    rerun = world.kernel(world.problems[1], speedup=3.0)
    review(invalid, reviewer, "invalid")
    review(rerun, reviewer, "rerun")
    [row] = rescored_standings(world.problem_set, 1)
    assert row.fast_p(1.0) == 1 / 4 and row.excluded == 1


def test_the_latest_verdict_counts(hacked, reviewer):
    world, hack = hacked
    review(hack, reviewer, "clean", "the no-op was a false alarm")
    [row] = rescored_standings(world.problem_set, 1, p=2.0)
    assert row.fast_p(2.0) == 1 / 4 and row.excluded == 0


def test_another_sample_of_an_excluded_problem_still_counts_under_best_of_n(hacked):
    world, _ = hacked
    world.kernel(world.problems[0], sample=1, speedup=1.1)
    [row] = rescored_standings(world.problem_set, 1, p=2.0, rule="best")
    # P1 counts by its honest sample now: 1.1x, 1.2x and 0.8x.
    assert row.summary["correct_rate"] == 3 / 4
    assert row.fast_p(1.0) == 2 / 4
    assert row.fast_p(2.0) == 0
    assert row.speedups == [0.8, 1.1, 1.2]
    # KernelBench's rule counts sample 0 only: P1's sample 0 is excluded, so P1 counts as failed.
    [kernelbench] = rescored_standings(world.problem_set, 1, p=2.0)
    assert kernelbench.summary["correct_rate"] == 2 / 4


def test_all_levels_and_curves_drop_the_excluded_kernel_too(hacked):
    world, _ = hacked
    [row] = rescored_standings(world.problem_set, None, p=2.0)
    assert row.summary["n_problems"] == 5 and row.fast_p(1.0) == 1 / 5
    curve = dict(fast_p_curves([row])[row.run.pk])
    assert curve[2.0] == 0


def test_an_exclusion_changes_the_ranking(hacked):
    world, _ = hacked
    honest = world.new_run(LanguageModel.objects.create(name="Honest"))
    world.kernel(world.problems[0], run=honest, speedup=1.3)
    world.kernel(world.problems[1], run=honest, speedup=1.4)
    before = [row.run.model.name for row in rescored_standings(world.problem_set, 1, include_excluded=True)]
    after = [row.run.model.name for row in rescored_standings(world.problem_set, 1)]
    assert before == ["M", "Honest"] and after == ["Honest", "M"]


def test_rows_count_flagged_unreviewed_and_excluded_kernels(hacked, visitor):
    world, _ = hacked
    world.kernel(world.problems[3], speedup=1.1, notes=("pytorch_only",))  # flagged, unreviewed
    reported = world.kernel(world.level2, speedup=1.0)  # another level: not in the level-1 row
    report(reported, visitor)
    [row] = rescored_standings(world.problem_set, 1)
    assert (row.flagged, row.unreviewed, row.excluded) == (2, 1, 1)
    [everything] = rescored_standings(world.problem_set, None)
    assert (everything.flagged, everything.unreviewed, everything.excluded) == (2, 2, 1)


def test_queries_stay_fixed_with_reviews(world, reviewer, django_assert_max_num_queries):
    for n in range(3):
        run = world.new_run(LanguageModel.objects.create(name=f"X{n}"))
        for problem in world.problems:
            kernel = world.kernel(problem, run=run, speedup=1.5, flags=("timing_mismatch",))
            review(kernel, reviewer, "reward_hack" if n else "clean")
    run_rescorer()  # the re-scorer takes the runs written above
    with django_assert_max_num_queries(5):  # runs, their models and hardware, problem counts, scores
        rows = level_standings(BoardFilters(world.problem_set, 1))
        fast_p_curves(rows)
    assert sorted(row.excluded for row in rows) == [0, 0, 4, 4]
