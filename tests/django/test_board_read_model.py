"""The boards' read model gives exactly the boards of the on-the-fly reference computation, on
random data with several samples, failures, unscored kernels, flags, reports, verdicts and
exclusions, and stays so through deletions. Runs on SQLite and PostgreSQL alike."""

from __future__ import annotations

import random

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.db import transaction
from django.utils import timezone

from leaderboard.boards import marks as board_marks
from leaderboard.boards import rescoring as board_rescoring
from leaderboard.boards.scoring import RULE_BEST, RULE_SAMPLE0
from leaderboard.models import DirtyRun, Kernel, LanguageModel, ProblemStats, Review, Run, RunScore
from leaderboard.reads.board.choices import BoardFilters
from leaderboard.reads.board.rows import level_standings, live_level_standings
from tests.django.reviews_factories import report, review, world_fixture  # noqa: F401  (fixtures)
from tests.rescoring import run_rescorer

pytestmark = pytest.mark.django_db

VERDICTS = ("clean", "reward_hack", "invalid", "rerun")


def random_kernel(world, rng: random.Random, run: Run, problem, sample: int) -> Kernel:
    kernel = Kernel.objects.create(run=run, problem=problem, sample_index=sample, source=f"# {run.pk} {sample}")
    outcome = rng.random()
    if outcome < 0.1:
        return kernel  # never evaluated
    correct = outcome < 0.7
    speedup = None if (correct and rng.random() < 0.15) else round(rng.uniform(0.2, 5.0), 2)
    world.evaluate(
        kernel,
        correct=correct,
        speedup=speedup,
        flags=("excessive_speedup",) if rng.random() < 0.1 else (),
        notes=("pytorch_only",) if rng.random() < 0.05 else (),
        origin="imported" if run.origin == "imported" else "measured",
    )
    return kernel


def random_world(world, rng: random.Random, reviewer, visitor) -> list[Kernel]:
    runs = [world.run] + [
        world.new_run(LanguageModel.objects.create(name=f"M{n}"), origin=rng.choice(["measured", "imported"]))
        for n in range(5)
    ]
    problems = [*world.problems, world.level2]
    kernels = []
    for run in runs:
        for problem in problems:
            for sample in range(rng.choice([0, 1, 1, 2, 3])):
                if sample == 0 and rng.random() < 0.1:
                    continue  # a problem whose sample 0 is missing
                kernels.append(random_kernel(world, rng, run, problem, sample))
    for kernel in rng.sample(kernels, k=len(kernels) // 3):
        review(kernel, reviewer, rng.choice(VERDICTS))
        if rng.random() < 0.3:
            report(kernel, visitor)
        if rng.random() < 0.2:
            world.evaluate(kernel, correct=True, speedup=round(rng.uniform(0.5, 4.0), 2))  # re-evaluated after
    return kernels


def boards(problem_set, reader) -> list:
    """Every board variant, as comparable tuples."""
    result = []
    for level in (None, 1, 2):
        for include_excluded in (False, True):
            for rule in (RULE_SAMPLE0, RULE_BEST):
                for p in (None, 1.3):
                    rows = reader(BoardFilters(problem_set, level, p=p, include_excluded=include_excluded, rule=rule))
                    result.append([_comparable(row) for row in rows])
    return result


def _comparable(row) -> tuple:
    summary = {k: (round(v, 12) if isinstance(v, float) else v) for k, v in row.summary.items()}
    counts = (row.unscored, row.flagged, row.unreviewed, row.excluded)
    return row.run.pk, summary, counts, row.speedups, row.interval, row.tied


def stored_states_match_the_rules() -> None:
    computed = Kernel.objects.with_review_state().order_by("pk")
    for kernel in computed:
        queued_at = (
            (kernel.latest_report_at or kernel.evaluated_at or kernel.created_at) if kernel.needs_review else None
        )
        assert (
            kernel.review_verdict,
            kernel.review_pending,
            kernel.review_excluded,
            kernel.review_flagged,
            kernel.review_queued_at,
        ) == (kernel.latest_verdict or "", kernel.needs_review, kernel.is_excluded, kernel.is_flagged, queued_at), (
            kernel.pk
        )


def counts_match() -> None:
    for run in Run.objects.all():
        assert run.n_kernels == run.kernels.count()
    for stats in ProblemStats.objects.all():
        assert stats.n_kernels == Kernel.objects.filter(problem_id=stats.problem_id).count()


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_read_model_gives_the_reference_boards(world, reviewer, visitor, seed):
    kernels = random_world(world, random.Random(seed), reviewer, visitor)
    run_rescorer()
    assert boards(world.problem_set, level_standings) == boards(world.problem_set, live_level_standings)
    stored_states_match_the_rules()
    counts_match()
    # deletions: a review, a kernel, a whole run
    Review.objects.filter(pk__in=Review.objects.order_by("?").values("pk")[:3]).first().delete()
    kernels[0].delete()
    Run.objects.exclude(pk=world.run.pk).first().delete()
    run_rescorer()
    assert boards(world.problem_set, level_standings) == boards(world.problem_set, live_level_standings)
    stored_states_match_the_rules()
    counts_match()


@pytest.mark.django_db(transaction=True)
def test_writes_after_commit_refresh_the_stored_rows(world):
    # A plain user, not the `reviewer` fixture: an earlier transactional test (live server, worker)
    # may have flushed the tables, the Reviewers group its data migration made included.
    reviewer = User.objects.create_user("judge")
    with transaction.atomic():
        kernel = world.kernel(world.problems[0], speedup=2.5)
        assert DirtyRun.objects.filter(run_id=world.run.pk).exists()  # marked, re-scored at commit
    assert not DirtyRun.objects.exists()
    assert RunScore.objects.get(run=world.run, level=1, with_excluded=False).s0_correct == 1
    with transaction.atomic():
        review(kernel, reviewer, "reward_hack")
    assert not DirtyRun.objects.exists()
    stored = RunScore.objects.get(run=world.run, level=1, with_excluded=False)
    assert (stored.s0_correct, stored.excluded) == (0, 1)
    assert Kernel.objects.get(pk=kernel.pk).review_excluded


def test_a_refresh_is_idempotent(world):
    world.kernel(world.problems[0], speedup=2.5)
    board_rescoring.refresh_runs([world.run.pk])
    first = sorted(board_rescoring._fields(row).items().__repr__() for row in RunScore.objects.all())
    board_rescoring.refresh_runs([world.run.pk])
    assert sorted(board_rescoring._fields(row).items().__repr__() for row in RunScore.objects.all()) == first


def test_rebuild_boards_verifies_stored_rows(world, reviewer, visitor):
    random_world(world, random.Random(7), reviewer, visitor)
    call_command("rebuild_boards", "--verify")
    RunScore.objects.filter(level=1).update(s0_correct=99)
    with pytest.raises(Exception, match="differ from a fresh computation"):
        call_command("rebuild_boards", "--verify-only")


def test_the_review_queue_reads_the_stored_state(world, visitor):
    kernel = world.kernel(world.problems[0], speedup=2.0, flags=("excessive_speedup",))
    assert list(Kernel.objects.needing_review()) == [kernel]
    Kernel.objects.filter(pk=kernel.pk).update(review_pending=False)  # the queue trusts the stored state
    assert not Kernel.objects.needing_review().exists()
    report(world.kernel(world.problems[1]), visitor)
    assert Kernel.objects.needing_review().count() == 1


def test_an_evaluation_finishing_costs_a_bounded_number_of_queries(world, django_assert_max_num_queries):
    for problem in world.problems:
        for sample in range(3):
            world.kernel(problem, sample=sample, speedup=1.5)
    board_rescoring.refresh_runs([world.run.pk])
    with django_assert_max_num_queries(14):
        board_rescoring.refresh_runs([world.run.pk])
    assert timezone.now()


@pytest.mark.django_db(transaction=True)
def test_an_evaluation_finishing_in_the_worker_rescores_its_run_after_commit(world):
    from leaderboard.evaluations.attempts import refresh_latest_evaluation

    kernel = Kernel.objects.create(run=world.run, problem=world.problems[0], source="class ModelNew: pass")
    evaluation = kernel.evaluations.create(hardware=world.hardware)  # queued
    with transaction.atomic():  # as store_result: save the verdict (its signal marks), point the kernel at it
        evaluation.state, evaluation.status, evaluation.compiled = "done", "correct", True
        evaluation.correct, evaluation.speedup = True, 2.0
        evaluation.save()
        refresh_latest_evaluation(kernel.pk)
    stored = RunScore.objects.get(run=world.run, level=1, with_excluded=False)
    assert stored.s0_correct == 1 and not DirtyRun.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_a_failed_rescoring_after_commit_keeps_the_write_and_the_mark(world, monkeypatch):
    def broken(run_ids):
        raise RuntimeError("database went away")

    monkeypatch.setattr(board_marks, "refresh_runs", broken)
    with transaction.atomic():
        kernel = world.kernel(world.problems[0], speedup=2.5)
    assert Kernel.objects.filter(pk=kernel.pk).exists()  # the write stands
    assert DirtyRun.objects.filter(run_id=world.run.pk).exists()  # the re-scorer (or the run's next write) re-scores it
    monkeypatch.undo()
    assert RunScore.objects.filter(run=world.run, level=1).exists() is False
    run_rescorer()
    assert RunScore.objects.get(run=world.run, level=1, with_excluded=False).s0_correct == 1
