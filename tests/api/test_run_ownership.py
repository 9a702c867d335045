"""Writes into a run are its creator's or an admin's (issue 19, case 6): verify, importing into it,
adding kernels (tests/api/test_submissions.py), the problem page's "one of your runs"; and a run's
kernels are evaluated on its hardware only."""

from __future__ import annotations

import pytest
from django.urls import reverse

from leaderboard.evaluations.queue import EvaluationRefused, request_evaluation
from leaderboard.models import Evaluation, Run
from problems.models import Hardware

from .conftest import KERNEL

BODY = {"model": "Model B", "hardware": "cpu", "problem_set": "kb", "name": "run-1"}
FILES = {"level_1_problem_1_sample_0_kernel.py": KERNEL}


def import_run(client):
    return client.post("/api/v1/runs/import/", {**BODY, "kernels": FILES}, format="json")


def test_only_the_creator_or_an_admin_verifies_a_run(token_client, ingestor, admin_user, run, django_user_model):
    other = django_user_model.objects.create_user("other-ingestor")
    other.groups.set(ingestor.groups.all())
    Run.objects.filter(pk=run.pk).update(created_by=ingestor)
    response = token_client(other).post(f"/api/v1/runs/{run.pk}/verify/")
    assert response.status_code == 403 and f"run {run.pk} is not yours" in response.json()["detail"]
    assert not Evaluation.objects.filter(state="queued").exists()
    assert token_client(ingestor).post(f"/api/v1/runs/{run.pk}/verify/").status_code == 202
    Evaluation.objects.filter(state="queued").delete()
    assert token_client(admin_user).post(f"/api/v1/runs/{run.pk}/verify/").status_code == 202


def test_an_ingestor_cannot_verify_a_demo_run(token_client, ingestor, run):
    Run.objects.filter(pk=run.pk).update(is_demo=True, origin="demo", created_by=None)
    assert token_client(ingestor).post(f"/api/v1/runs/{run.pk}/verify/").status_code == 403
    assert not Evaluation.objects.filter(state="queued").exists()


def test_importing_into_another_users_run_makes_a_run_of_ones_own(token_client, ingestor, problem_set, hardware):
    first = import_run(token_client(ingestor)).json()["run"]
    other = type(ingestor).objects.create_user("other-ingestor")
    other.groups.set(ingestor.groups.all())
    reply = import_run(token_client(other)).json()
    assert reply["run"]["id"] != first["id"] and "another user's" in reply["warnings"][0]
    assert Run.objects.get(pk=first["id"]).kernels.count() == 1
    assert Run.objects.get(pk=reply["run"]["id"]).created_by == other


def test_the_form_lists_only_ones_own_runs(client, ingestor, run, model, problem_set, hardware):
    mine = Run.objects.create(model=model, problem_set=problem_set, hardware=hardware, name="mine", created_by=ingestor)
    client.force_login(ingestor)
    html = client.get(reverse("problem-submit", args=[problem_set.problems.get(level=1, number=1).pk])).content
    assert f'<option value="{mine.pk}"'.encode() in html and f'<option value="{run.pk}"'.encode() not in html


def test_an_evaluation_on_other_hardware_than_the_runs_is_refused(run):
    h200 = Hardware.objects.create(slug="h200", name="H200", kind=Hardware.Kind.GPU)
    with pytest.raises(EvaluationRefused, match="evaluated there, not on h200"):
        request_evaluation(run.kernels.first(), h200)
    assert not Evaluation.objects.filter(hardware=h200).exists()
