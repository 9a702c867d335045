"""A stored kernel's source never changes (issue 19, case 1): a re-import that changes a source is
a new run, the stored kernel keeps its evaluations, verdict and board place, and the model refuses
the change on every path (save, update, bulk_update)."""

from __future__ import annotations

import pytest

from leaderboard.evaluations.attempts import claim, store_result
from leaderboard.models import Evaluation, ImmutableSourceError, Kernel, Review, Run, RunScore
from leaderboard.reviews.services import record_verdict
from tests.rescoring import run_rescorer

from .conftest import KERNEL

URL = "/api/v1/runs/import/"
ZEROS = KERNEL.replace("return a @ b", "return torch.zeros(a.shape[0], b.shape[1])")
CLAIMS = {"1": {"sample_id": 0, "compiled": True, "correctness": True, "runtime": 1.0}}
BODY = {"model": "Model B", "hardware": "cpu", "problem_set": "kb", "name": "run-1", "eval_results": CLAIMS}


def import_run(client, source: str):
    body = {**BODY, "kernels": {"level_1_problem_1_sample_0_kernel.py": source}}
    return client.post(URL, body, format="json")


def measure_correct(evaluation: Evaluation) -> None:
    """What a worker does for a correct kernel at 3x."""
    store_result(
        claim(evaluation.pk, "host.1"), {"status": "correct", "correct": True, "compiled": True, "speedup": 3.0}
    )


def board_rows(run: Run) -> list[tuple]:
    run_rescorer()
    return list(run.scores.order_by("level", "with_excluded").values_list("level", "s0_correct", "s0_speedups"))


def test_a_reimport_with_another_source_leaves_the_verified_kernel_and_its_board_place(
    token_client, ingestor, reviewer, baseline
):
    client = token_client(ingestor)
    first = import_run(client, KERNEL)
    assert first.status_code == 201, first.content
    run = Run.objects.get(pk=first.json()["run"]["id"])
    verify = client.post(f"/api/v1/runs/{run.pk}/verify/")
    measure_correct(Evaluation.objects.get(pk=verify.json()["evaluations"][0]))
    kernel = run.kernels.get()
    record_verdict(kernel, Review.Verdict.CLEAN, by=reviewer)
    kernel.refresh_from_db()
    before = (kernel.source, kernel.source_hash, kernel.latest_evaluation_id, kernel.review_verdict)
    scores = board_rows(run)
    assert scores and kernel.latest_evaluation.speedup == 3.0

    second = import_run(client, ZEROS)

    assert second.status_code == 201, second.content
    reply = second.json()
    assert reply["run"]["id"] != run.pk and reply["run"]["name"] == "run-1 (revision 2)"
    assert any("never changes" in warning for warning in reply["warnings"])
    kernel.refresh_from_db()
    assert (kernel.source, kernel.source_hash, kernel.latest_evaluation_id, kernel.review_verdict) == before
    assert kernel.evaluations.count() == 2 and run.kernels.count() == 1
    new = Kernel.objects.get(run_id=reply["run"]["id"])
    assert new.pk != kernel.pk and new.source == ZEROS
    assert not new.reviews.exists() and new.review_verdict == ""
    assert not new.evaluations.filter(origin="measured").exists()
    assert board_rows(run) == scores
    # The same upload again changes nothing; the first upload again goes to the first run.
    assert import_run(client, ZEROS).json()["run"]["id"] == new.run_id
    again = import_run(client, KERNEL)
    assert again.status_code == 200 and again.json()["run"]["id"] == run.pk
    assert RunScore.objects.filter(run=run).exists()


def test_kernel_save_refuses_a_changed_source(run):
    kernel = run.kernels.first()
    kernel.source = ZEROS
    with pytest.raises(ImmutableSourceError):
        kernel.save()
    fresh = Kernel.objects.get(pk=kernel.pk)
    fresh.sample_index = 7  # other fields may change
    fresh.save()
    stranger = Kernel(pk=kernel.pk, run=run, problem=kernel.problem, source=ZEROS)
    with pytest.raises(ImmutableSourceError):
        stranger.save()
    assert Kernel.objects.get(pk=kernel.pk).source == KERNEL


@pytest.mark.parametrize("field", ["source", "source_hash"])
def test_bulk_writes_refuse_the_source(run, field):
    kernels = list(run.kernels.all())
    for kernel in kernels:
        setattr(kernel, field, "x")
    with pytest.raises(ImmutableSourceError):
        Kernel.objects.bulk_update(kernels, [field])
    with pytest.raises(ImmutableSourceError):
        run.kernels.update(**{field: "x"})
    assert set(run.kernels.values_list("source", flat=True)) == {KERNEL}
