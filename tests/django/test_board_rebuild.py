"""The whole-rebuild of the boards' read model (leaderboard/boards/rebuild.py): on PostgreSQL
by sets, it stores exactly what re-scoring every run through rescoring.refresh_runs stores (scores,
kernels' review state, kernel counts), on random worlds and on the web benchmark's own dataset;
elsewhere it is rescoring.rebuild_all. And the sampled check finds a wrong row."""

from __future__ import annotations

import random

import pytest
from django.core.management import call_command

from benchmarks.web import dataset
from leaderboard.boards import rebuild
from leaderboard.boards import rescoring as board_rescoring
from leaderboard.boards import stored as board_stored
from leaderboard.models import DirtyRun, Kernel, LanguageModel, ProblemStats, Run, RunScore
from tests.django.reviews_factories import world_fixture  # noqa: F401  (fixtures)
from tests.django.test_board_read_model import random_world

pytestmark = pytest.mark.django_db


def read_model() -> dict:
    """Everything a rebuild writes, as comparable values."""
    scores = {board_rescoring._key(row): board_rescoring._fields(row) for row in RunScore.objects.all()}
    states = {
        pk: tuple(rest) for pk, *rest in Kernel.objects.order_by("pk").values_list("pk", *board_stored.STATE_FIELDS)
    }
    return {
        "scores": scores,
        "states": states,
        "runs": dict(Run.objects.values_list("pk", "n_kernels")),
        "problems": dict(ProblemStats.objects.values_list("problem_id", "n_kernels")),
        "dirty": list(DirtyRun.objects.values_list("run_id", flat=True)),
    }


def forget_read_model() -> None:
    RunScore.objects.all().delete()
    Kernel.objects.update(
        review_verdict="", review_pending=False, review_excluded=False, review_flagged=False,
        review_queued_at=None, latest_speedup=None, ranked_speedup=None,
    )  # fmt: skip
    Run.objects.update(n_kernels=0)
    ProblemStats.objects.all().delete()


def rebuilt_both_ways() -> tuple[dict, dict]:
    """(what re-scoring every run stores, what the whole rebuild stores), from the same data."""
    board_rescoring.rebuild_all()
    reference = read_model()
    forget_read_model()
    rebuild.rebuild()
    return reference, read_model()


@pytest.mark.parametrize("seed", [1, 2])
def test_the_rebuild_stores_what_rescoring_every_run_stores(world, reviewer, visitor, seed):
    rng = random.Random(seed)
    kernels = random_world(world, rng, reviewer, visitor)
    for kernel in rng.sample(kernels, k=len(kernels) // 5):  # figures published elsewhere, integral ones too
        # several hardwares in one run: named by a fixed rule (the last in code point order), both ways
        kernel.published_speedup = rng.choice([2.0, 1.37, 12.5])
        kernel.published_hardware = rng.choice(["L40S", "h100", "A100", ""])
        kernel.save(update_fields=["published_speedup", "published_hardware"])
    world.new_run(LanguageModel.objects.create(name="nothing yet"))  # a run without kernels
    reference, rebuilt = rebuilt_both_ways()
    assert rebuilt == reference
    assert rebuild.verify_runs(Run.objects.values_list("pk", flat=True)) == []


def test_the_rebuild_stores_what_rescoring_every_run_stores_on_the_benchmark_dataset():
    dataset.generate(dataset.parse_scale("3k"), write=lambda _: None)
    reference, rebuilt = rebuilt_both_ways()
    assert rebuilt == reference
    assert any(score["excluded"] for score in reference["scores"].values())  # exclusions were exercised


def test_the_sampled_check_finds_a_wrong_row(world, reviewer, visitor):
    random_world(world, random.Random(5), reviewer, visitor)
    call_command("rebuild_boards", "--verify", "--sample", "3")
    unflagged = Kernel.objects.filter(review_flagged=False).order_by("pk").first()
    Kernel.objects.filter(pk=unflagged.pk).update(review_flagged=True)  # a stored state the rules do not give
    with pytest.raises(Exception, match="differ from a fresh computation"):
        call_command("rebuild_boards", "--verify-only", "--sample", "100")
