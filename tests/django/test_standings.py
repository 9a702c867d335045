import pytest

from leaderboard.models import Evaluation, Kernel, LanguageModel, Run
from leaderboard.reads.board.choices import BoardFilters
from leaderboard.reads.board.rows import fast_p_curves, level_standings
from problems.models import Hardware, Problem, ProblemSet
from tests.rescoring import rescored_standings, run_rescorer

pytestmark = pytest.mark.django_db


@pytest.fixture
def setup():
    problem_set = ProblemSet.objects.create(name="S", slug="s")
    problems = [
        Problem.objects.create(problem_set=problem_set, level=1, number=n, name=f"P{n}", source="x")
        for n in range(1, 5)
    ]
    Problem.objects.create(problem_set=problem_set, level=2, number=1, name="Q", source="x")
    hardware = Hardware.objects.create(slug="h200", name="H200")
    run = Run.objects.create(model=LanguageModel.objects.create(name="M"), problem_set=problem_set, hardware=hardware)
    return problem_set, problems, hardware, run


def add_kernel(run, problem, sample=0, *, correct=True, speedup=None, compiled=True):
    kernel = Kernel.objects.create(run=run, problem=problem, sample_index=sample, source="class ModelNew: pass")
    evaluation = Evaluation.objects.create(
        kernel=kernel,
        hardware=run.hardware,
        state="done",
        status="correct" if correct else "incorrect",
        compiled=compiled,
        correct=correct,
        speedup=speedup,
    )
    kernel.latest_evaluation = evaluation
    kernel.save()


def test_it_scores_a_level_against_every_problem_of_the_level(setup):
    problem_set, problems, _, run = setup
    add_kernel(run, problems[0], speedup=2.5)
    add_kernel(run, problems[1], speedup=1.0)  # exactly 1.0 is not faster than 1.0
    add_kernel(run, problems[2], correct=False)
    # problems[3] has no kernel: it counts as failed in the denominator of 4.
    [row] = rescored_standings(problem_set, 1, p=2.2)
    assert row.summary["compiled_rate"] == 3 / 4
    assert row.summary["correct_rate"] == 2 / 4
    assert row.fast_p(1.0) == 1 / 4
    assert row.fast_p(2.2) == 1 / 4
    assert row.fast_p(2.0) == 1 / 4


def test_all_levels_use_the_whole_set_as_denominator(setup):
    problem_set, problems, _, run = setup
    add_kernel(run, problems[0], speedup=2.5)
    [row] = rescored_standings(problem_set, None)
    assert row.summary["n_problems"] == 5 and row.fast_p(1.0) == 1 / 5


def test_sample_0_counts_by_default_as_in_kernelbench(setup):
    problem_set, problems, _, run = setup
    add_kernel(run, problems[0], 0, speedup=0.5)
    add_kernel(run, problems[0], 1, speedup=3.0)
    [row] = rescored_standings(problem_set, 1)
    assert row.fast_p(2.0) == 0 and row.fast_p(0.4) == 1 / 4
    # best-of-n is there, labelled, never silently
    assert row.summary["best_fast_2"] == 1 / 4 and row.summary["rule"] == "sample0"


def test_the_best_sample_counts_under_best_of_n(setup):
    problem_set, problems, _, run = setup
    add_kernel(run, problems[0], 0, speedup=0.5)
    add_kernel(run, problems[0], 1, speedup=3.0)
    [row] = rescored_standings(problem_set, 1, rule="best")
    assert row.fast_p(2.0) == 1 / 4 and row.summary["fast_2"] == 1 / 4


def test_a_problem_without_sample_0_counts_as_failed(setup):
    problem_set, problems, _, run = setup
    add_kernel(run, problems[0], 1, speedup=3.0)
    [row] = rescored_standings(problem_set, 1)
    assert row.summary["correct_rate"] == 0 and row.summary["attempted"] == 0
    assert row.summary["best_correct_rate"] == 1 / 4


def test_correct_without_speedup_is_reported_as_unscored(setup):
    problem_set, problems, _, run = setup
    add_kernel(run, problems[0], speedup=None)
    add_kernel(run, problems[1], speedup=1.5)
    [row] = rescored_standings(problem_set, 1)
    # Correctness never depends on baselines: correct-unscored counts in fast_0, never above it.
    assert row.unscored == 1 and row.summary["unscored"] == 1
    assert row.summary["correct_rate"] == row.summary["fast_0"] == 2 / 4
    assert row.fast_p(0.5) == 1 / 4 and row.summary["geomean_speedup"] == 1.5


def test_queries_do_not_grow_with_rows(setup, django_assert_max_num_queries):
    problem_set, problems, hardware, run = setup
    for n in range(3):
        extra = Run.objects.create(
            model=LanguageModel.objects.create(name=f"X{n}"), problem_set=problem_set, hardware=hardware
        )
        for problem in problems:
            add_kernel(extra, problem, speedup=1.5)
    run_rescorer()  # the re-scorer takes the runs written above
    with django_assert_max_num_queries(5):  # runs, their models and hardware, problem counts, scores
        rows = level_standings(BoardFilters(problem_set, 1))
        curves = fast_p_curves(rows)
    assert len(rows) == 4 and len(curves) == 4
