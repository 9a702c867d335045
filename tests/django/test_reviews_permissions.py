"""Who may do what: a visitor cannot review; a reviewer reviews but cannot edit scores or runs,
in the admin or the API; an admin can do both."""

import pytest
from django.contrib.auth.models import Group
from django.core.cache import cache
from django.test import Client

from leaderboard.models import Evaluation, Review, Run
from tests.django.reviews_factories import _plain_static_files, world_fixture  # noqa: F401  (fixtures)

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _fresh_throttle():
    cache.clear()  # the API's write throttle counts in the cache
    yield
    cache.clear()


@pytest.fixture
def staff_reviewer(reviewer):
    reviewer.is_staff = True  # may open the admin; the group decides what it may do there
    reviewer.save()
    return reviewer


def admin_client(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def change_form_data(response) -> dict:
    """The admin change form's current values, as a browser would post them back."""
    form = response.context["adminform"].form
    data = {}
    for name, field in form.fields.items():
        value = field.prepare_value(form[name].value())
        data[name] = "" if value is None else value
    return data


def test_the_reviewers_group_holds_real_permissions(reviewer, visitor, ingestor, admin_user):
    assert reviewer.has_perm("leaderboard.add_review") and reviewer.has_perm("leaderboard.view_kernelreport")
    assert reviewer.has_perm("leaderboard.view_evaluation") and reviewer.has_perm("leaderboard.view_run")
    for perm in (
        "change_evaluation",
        "add_evaluation",
        "change_run",
        "add_run",
        "change_reportedscore",
        "add_reportedscore",
        "change_kernel",
        "delete_review",
        "change_review",
    ):
        assert not reviewer.has_perm(f"leaderboard.{perm}"), perm
    assert not visitor.has_perm("leaderboard.add_review") and not ingestor.has_perm("leaderboard.add_review")
    assert admin_user.has_perm("leaderboard.add_review") and admin_user.has_perm("leaderboard.change_evaluation")
    assert Group.objects.filter(name="Reviewers").count() == 1


def test_a_reviewer_sees_but_cannot_change_scores_or_runs_in_the_admin(world, staff_reviewer):
    kernel = world.kernel(world.problems[0], speedup=2.0)
    evaluation = kernel.latest_evaluation
    client = admin_client(staff_reviewer)
    page = client.get(f"/admin/leaderboard/evaluation/{evaluation.pk}/change/")
    assert page.status_code == 200 and b'name="_save"' not in page.content  # a read-only view
    assert client.post(f"/admin/leaderboard/evaluation/{evaluation.pk}/change/", {"speedup": "50"}).status_code == 403
    assert client.post(f"/admin/leaderboard/run/{world.run.pk}/change/", {"setting": "agent"}).status_code == 403
    assert client.get("/admin/leaderboard/evaluation/add/").status_code == 403
    assert client.get("/admin/leaderboard/reportedscore/add/").status_code == 403
    assert client.post(f"/admin/leaderboard/evaluation/{evaluation.pk}/delete/", {"post": "yes"}).status_code == 403
    evaluation.refresh_from_db()
    assert evaluation.speedup == 2.0 and Run.objects.get().setting == "one-shot"


def test_a_reviewer_records_a_verdict_in_the_admin_as_themselves(world, staff_reviewer, admin_user):
    kernel = world.kernel(world.problems[0])
    response = admin_client(staff_reviewer).post(
        "/admin/leaderboard/review/add/", {"kernel": kernel.pk, "verdict": "rerun", "note": "again"}
    )
    assert response.status_code == 302
    made = Review.objects.get()
    assert made.reviewer == staff_reviewer and made.verdict == "rerun"
    assert Evaluation.objects.filter(kernel=kernel, state="queued").exists()  # through the service


def test_nobody_edits_or_deletes_a_verdict_in_the_admin(world, reviewer, admin_user):
    kernel = world.kernel(world.problems[0])
    made = Review.objects.create(kernel=kernel, reviewer=reviewer, verdict="clean", note="ok")
    client = admin_client(admin_user)
    assert client.post(f"/admin/leaderboard/review/{made.pk}/change/", {"verdict": "invalid"}).status_code == 403
    assert client.post(f"/admin/leaderboard/review/{made.pk}/delete/", {"post": "yes"}).status_code == 403
    made.refresh_from_db()
    assert made.verdict == "clean"


def test_an_admin_can_both_review_and_change_runs_in_the_admin(world, admin_user):
    kernel = world.kernel(world.problems[0])
    client = admin_client(admin_user)
    response = client.post("/admin/leaderboard/review/add/", {"kernel": kernel.pk, "verdict": "invalid", "note": ""})
    assert response.status_code == 302 and Review.objects.get().reviewer == admin_user
    url = f"/admin/leaderboard/run/{world.run.pk}/change/"
    data = change_form_data(client.get(url)) | {"setting": "agent"}
    assert client.post(url, data).status_code == 302
    assert Run.objects.get().setting == "agent"


def test_visitors_have_no_admin(world, visitor):
    response = admin_client(visitor).get("/admin/leaderboard/review/add/")
    assert response.status_code == 302 and "/admin/login/" in response["Location"]


def test_a_reviewer_cannot_change_scores_or_runs_through_the_api(world, reviewer, token_client):
    kernel = world.kernel(world.problems[0], speedup=2.0)
    api = token_client(reviewer)
    evaluation = kernel.latest_evaluation
    assert api.patch(f"/api/v1/evaluations/{evaluation.pk}/", {"speedup": 50}, format="json").status_code in (403, 405)
    assert api.delete(f"/api/v1/evaluations/{evaluation.pk}/").status_code in (403, 405)
    assert api.patch(f"/api/v1/runs/{world.run.pk}/", {"setting": "agent"}, format="json").status_code in (403, 405)
    assert api.post(f"/api/v1/runs/{world.run.pk}/verify/").status_code == 403
    score = {
        "model": "M",
        "variant": "v",
        "metric": "fast_1",
        "value": 50,
        "unit": "%",
        "date": "2025-01-01",
        "source_url": "https://example.com/x",
    }
    assert api.post("/api/v1/reported-scores/", score, format="json").status_code == 403
    evaluation.refresh_from_db()
    assert evaluation.speedup == 2.0 and not Evaluation.objects.filter(state="queued").exists()


def test_an_admin_can_review_and_add_scores_through_the_api(world, admin_user, token_client):
    kernel = world.kernel(world.problems[0])
    api = token_client(admin_user)
    response = api.post(f"/api/v1/kernels/{kernel.pk}/reviews/", {"verdict": "clean"}, format="json")
    assert response.status_code == 201
    score = {
        "model": "M",
        "variant": "v",
        "metric": "fast_1",
        "value": 50,
        "unit": "%",
        "date": "2025-01-01",
        "source_url": "https://example.com/x",
    }
    assert api.post("/api/v1/reported-scores/", score, format="json").status_code == 201
    assert api.post(f"/api/v1/runs/{world.run.pk}/verify/").status_code == 202


def test_visitors_cannot_review_through_the_api(world, visitor, token_client):
    kernel = world.kernel(world.problems[0])
    for client in (token_client(None), token_client(visitor)):
        assert client.post(
            f"/api/v1/kernels/{kernel.pk}/reviews/", {"verdict": "clean"}, format="json"
        ).status_code in (401, 403)
        assert client.post(
            "/api/v1/reviews/", {"kernel": kernel.pk, "verdict": "clean"}, format="json"
        ).status_code in (401, 403)
    assert not Review.objects.exists()
