"""The reviewer workflow in the REST API: verdicts, the audit trail, reports, the queue, and
exclusions reaching the API's leaderboard."""

import pytest
from django.core.cache import cache

from leaderboard.models import Evaluation, KernelReport, Review
from tests.django.reviews_factories import _plain_static_files, report, review, world_fixture  # noqa: F401  (fixtures)
from tests.rescoring import run_rescorer

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _fresh_throttle():
    cache.clear()
    yield
    cache.clear()


def test_a_reviewer_records_a_verdict_and_the_trail_keeps_every_one(world, reviewer, admin_user, token_client):
    kernel = world.kernel(world.problems[0], flags=("excessive_speedup",))
    url = f"/api/v1/kernels/{kernel.pk}/reviews/"
    first = token_client(reviewer).post(url, {"verdict": "reward_hack", "note": "no-op timing"}, format="json")
    assert first.status_code == 201 and first.json()["reviewer"] == "reviewer"
    token_client(admin_user).post(url, {"verdict": "invalid"}, format="json")
    state = token_client(None).get(url).json()
    assert [(r["verdict"], r["reviewer"]) for r in state["reviews"]] == [
        ("invalid", "admin"),
        ("reward_hack", "reviewer"),
    ]
    assert state["latest_verdict"] == "invalid" and state["excluded"] and state["exclusion"]["reviewer"] == "admin"
    assert state["flags"][0]["code"] == "excessive_speedup" and state["needs_review"] is False


def test_needs_rerun_through_the_api_queues_an_evaluation(world, reviewer, token_client):
    kernel = world.kernel(world.problems[0])
    body = (
        token_client(reviewer).post(f"/api/v1/kernels/{kernel.pk}/reviews/", {"verdict": "rerun"}, format="json").json()
    )
    queued = Evaluation.objects.get(kernel=kernel, state=Evaluation.State.QUEUED)
    assert body["queued_evaluation"] == queued.pk


def test_the_main_reviews_endpoint_goes_through_the_same_service(world, reviewer, token_client):
    kernel = world.kernel(world.problems[0])
    response = token_client(reviewer).post("/api/v1/reviews/", {"kernel": kernel.pk, "verdict": "rerun"}, format="json")
    assert response.status_code == 201
    assert Review.objects.get().reviewer == reviewer
    assert Evaluation.objects.filter(kernel=kernel, state=Evaluation.State.QUEUED).count() == 1


def test_a_bad_verdict_is_400(world, reviewer, token_client):
    kernel = world.kernel(world.problems[0])
    response = token_client(reviewer).post(f"/api/v1/kernels/{kernel.pk}/reviews/", {"verdict": "gone"}, format="json")
    assert response.status_code == 400 and "verdict" in response.json()
    assert (
        token_client(reviewer).post("/api/v1/kernels/0/reviews/", {"verdict": "clean"}, format="json").status_code
        == 404
    )


def test_a_signed_in_user_reports_once_until_a_verdict(world, visitor, token_client):
    kernel = world.kernel(world.problems[0])
    url = f"/api/v1/kernels/{kernel.pk}/reports/"
    assert token_client(None).post(url, {"reason": "x"}, format="json").status_code in (401, 403)
    assert token_client(visitor).post(url, {"reason": "too fast"}, format="json").status_code == 201
    again = token_client(visitor).post(url, {"reason": "really"}, format="json")
    assert again.status_code == 200 and again.json()["created"] is False
    assert KernelReport.objects.count() == 1


def test_the_queue_is_for_reviewers_and_filters(world, reviewer, visitor, token_client):
    flagged = world.kernel(world.problems[0], speedup=2.0, flags=("side_stream_work",))
    reported = world.kernel(world.level2, speedup=1.1)
    report(reported, visitor)
    assert token_client(visitor).get("/api/v1/review-queue/").status_code == 403
    assert token_client(None).get("/api/v1/review-queue/").status_code in (401, 403)
    api = token_client(reviewer)
    rows = api.get("/api/v1/review-queue/?sort=speedup").json()["results"]
    assert [row["kernel"] for row in rows] == [flagged.pk, reported.pk]
    assert rows[0]["flags"] == ["side_stream_work"] and rows[1]["reported"] is True
    assert [r["kernel"] for r in api.get("/api/v1/review-queue/?level=2").json()["results"]] == [reported.pk]
    assert api.get("/api/v1/review-queue/?flag=bogus").status_code == 400


def test_an_exclusion_reaches_the_api_leaderboard(world, reviewer, token_client):
    hack = world.kernel(world.problems[0], speedup=2.5)
    world.kernel(world.problems[1], speedup=1.2)
    url = f"/api/v1/leaderboard/?set={world.problem_set.slug}&level=1&p=1"
    run_rescorer()
    assert token_client(None).get(url).json()["results"][0]["fast_p"] == 2 / 4
    review(hack, reviewer, "reward_hack")
    run_rescorer()
    assert token_client(None).get(url).json()["results"][0]["fast_p"] == 1 / 4
