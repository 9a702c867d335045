"""Per-user quotas (issue 19, case 8): queued-or-running evaluations (429) and stored bytes of
kernel source (409), each refusal naming the quota and the numbers, with nothing written."""

from __future__ import annotations

from leaderboard.models import Evaluation, Kernel, Run

from .conftest import KERNEL

FILES = {f"level_1_problem_{p}_sample_0_kernel.py": KERNEL for p in (1, 2)}
BODY = {"model": "Model B", "hardware": "cpu", "problem_set": "kb", "name": "run-1", "kernels": FILES}


def test_a_verify_past_the_pending_quota_is_429_and_queues_nothing(
    token_client, ingestor, hardware, problem_set, settings
):
    client = token_client(ingestor)
    run_id = client.post("/api/v1/runs/import/", BODY, format="json").json()["run"]["id"]
    settings.EVAL_MAX_PENDING_PER_USER = 1
    response = client.post(f"/api/v1/runs/{run_id}/verify/")
    assert response.status_code == 429 and response["Retry-After"]
    detail = response.json()["detail"]
    assert (
        "EVAL_MAX_PENDING_PER_USER" in detail and "0 queued or running and asked for 2 more; the limit is 1" in detail
    )
    assert not Evaluation.objects.filter(state="queued").exists()
    settings.EVAL_MAX_PENDING_PER_USER = 2
    assert client.post(f"/api/v1/runs/{run_id}/verify/").status_code == 202


def test_a_submission_past_the_pending_quota_is_429_and_stores_nothing(
    token_client, ingestor, problem_set, hardware, model, settings
):
    settings.EVAL_MAX_PENDING_PER_USER = 1
    client = token_client(ingestor)
    data = {
        "problem": problem_set.problems.get(level=1, number=1).pk,
        "source": KERNEL,
        "hardware": "cpu",
        "model": model.slug,
    }
    assert client.post("/api/v1/submissions/", data, format="json").status_code == 202
    response = client.post("/api/v1/submissions/", data, format="json")
    assert response.status_code == 429 and "1 queued or running" in response.json()["detail"]
    assert Kernel.objects.count() == 1


def test_an_import_past_the_storage_quota_is_409_and_writes_nothing(
    token_client, ingestor, problem_set, hardware, settings
):
    settings.KERNEL_SOURCE_MAX_BYTES_PER_USER = len(KERNEL.encode()) * 2 - 1
    response = token_client(ingestor).post("/api/v1/runs/import/", BODY, format="json")
    assert response.status_code == 409
    detail = response.json()["detail"]
    assert "KERNEL_SOURCE_MAX_BYTES_PER_USER" in detail and f"0 bytes stored and this adds {len(KERNEL) * 2}" in detail
    assert not Run.objects.exists() and not Kernel.objects.exists()


def test_a_submission_past_the_storage_quota_is_409(token_client, ingestor, problem_set, hardware, model, settings):
    settings.KERNEL_SOURCE_MAX_BYTES_PER_USER = len(KERNEL.encode()) + 10
    client = token_client(ingestor)
    data = {
        "problem": problem_set.problems.get(level=1, number=1).pk,
        "source": KERNEL,
        "hardware": "cpu",
        "model": model.slug,
    }
    assert client.post("/api/v1/submissions/", data, format="json").status_code == 202
    response = client.post("/api/v1/submissions/", data, format="json")
    assert response.status_code == 409 and "stored kernel source" in response.json()["detail"]
    assert Kernel.objects.count() == 1 and Kernel.objects.get().source_bytes == len(KERNEL.encode())


def test_the_servers_own_commands_are_exempt(problem_set, hardware, settings, run):
    from leaderboard.ingest.run_import import verify_run

    settings.EVAL_MAX_PENDING_PER_USER = 0
    queued, _ = verify_run(run, by="manage.py test")
    assert len(queued) == 2
