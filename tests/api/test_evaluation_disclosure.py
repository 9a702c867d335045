"""An evaluation's log and error text (the kernel's own output), its worker's name and the
sandbox's private environment reach reviewers, admins and the kernel's submitter only, in the API
and on the kernel page (leaderboard/reads/disclosure.py). Issue 19 cases 7 and 14: a correct
kernel printed /etc/passwd, and anonymous GET /api/v1/evaluations/<id>/ returned it."""

from __future__ import annotations

import io
import zipfile

import pytest
from django.test import Client

from leaderboard.models import Evaluation

PASSWD = "root:x:0:0:root:/root:/bin/bash"
WORKER = "gpu-host-7.4242.ab12"
ENVIRONMENT = {
    "device_name": "NVIDIA H200", "torch": "2.13.0", "isolation_mode": "root",
    "uid": 61001, "reference_uid": 61002, "hidden_paths": ["/srv/kernelbench/var"],
    "kernel_confinement": {"uid": 61001}, "build_dir": "/var/cache/kernelbench/builds/ab12",
}  # fmt: skip
PRIVATE = ("61001", "/srv/kernelbench/var", "/var/cache/kernelbench", WORKER, PASSWD, "gpu-host-9")


@pytest.fixture
def evaluation(run, ingestor) -> Evaluation:
    kernel = run.kernels.order_by("pk").first()
    kernel.submitted_by = ingestor
    kernel.save(update_fields=["submitted_by"])
    evaluation = kernel.latest_evaluation
    Evaluation.objects.filter(pk=evaluation.pk).update(
        log=f"--- kernel process output ---\n{PASSWD}\n", error=f"RuntimeError: {PASSWD}", environment=ENVIRONMENT,
        worker_name=WORKER, failure_reason="attempt 1 on gpu-host-9.77.cd34: lost the database; retried",
    )  # fmt: skip
    evaluation.refresh_from_db()
    return evaluation


def _text(response) -> str:
    return response.content.decode()


def test_anonymous_detail_withholds_the_log_error_and_host_details(evaluation, token_client):
    response = token_client(None).get(f"/api/v1/evaluations/{evaluation.pk}/")
    data = response.json()
    assert response.status_code == 200
    assert data["log"] is None and data["error"] is None and data["withheld"] == ["log", "error"]
    assert data["environment"] == {"device_name": "NVIDIA H200", "torch": "2.13.0", "isolation_mode": "root"}
    assert data["worker_name"] == "" and data["progress"]["worker"] == ""
    assert data["failure_reason"] == "attempt 1: lost the database; retried"
    assert not [leak for leak in PRIVATE if leak in _text(response)]


def test_anonymous_list_withholds_the_error(evaluation, token_client):
    text = _text(token_client(None).get("/api/v1/evaluations/"))
    assert not [leak for leak in PRIVATE if leak in text]


def test_a_signed_in_stranger_gets_the_public_view(evaluation, token_client, visitor):
    assert token_client(visitor).get(f"/api/v1/evaluations/{evaluation.pk}/").json()["log"] is None


@pytest.mark.parametrize("who", ["ingestor", "reviewer", "admin_user"])
def test_the_submitter_reviewers_and_admins_read_everything(evaluation, token_client, who, request):
    data = token_client(request.getfixturevalue(who)).get(f"/api/v1/evaluations/{evaluation.pk}/").json()
    assert PASSWD in data["log"] and PASSWD in data["error"] and data["withheld"] == []
    assert data["environment"] == ENVIRONMENT and data["worker_name"] == WORKER


def test_the_runs_creator_reads_everything(evaluation, token_client, visitor):
    evaluation.kernel.run.created_by = visitor
    evaluation.kernel.run.save(update_fields=["created_by"])
    assert PASSWD in token_client(visitor).get(f"/api/v1/evaluations/{evaluation.pk}/").json()["log"]


def test_the_kernel_page_withholds_them_from_visitors(evaluation, settings):
    settings.STORAGES = {
        **settings.STORAGES,
        "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    }
    page = _text(Client().get(f"/kernels/{evaluation.kernel_id}/"))
    assert "Log withheld" in page and "evaluation-error-withheld" in page
    assert not [leak for leak in PRIVATE if leak in page]


def test_the_kernel_page_shows_them_to_the_submitter(evaluation, ingestor, settings):
    settings.STORAGES = {
        **settings.STORAGES,
        "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    }
    client = Client()
    client.force_login(ingestor)
    page = _text(client.get(f"/kernels/{evaluation.kernel_id}/"))
    assert PASSWD in page and "/srv/kernelbench/var" in page and "withheld" not in page


def _exported_results(client, run) -> str:
    archive = zipfile.ZipFile(io.BytesIO(client.get(f"/api/v1/runs/{run.pk}/export/").content))
    return next(archive.read(name) for name in archive.namelist() if name.endswith("eval_results.json")).decode()


def test_the_run_export_carries_error_text_for_those_who_may_read_it(evaluation, token_client, reviewer):
    run = evaluation.kernel.run
    assert "root:x:0" not in _exported_results(token_client(None), run)
    assert "root:x:0" in _exported_results(token_client(reviewer), run)
