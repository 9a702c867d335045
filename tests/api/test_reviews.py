from leaderboard.models import Evaluation, Review

URL = "/api/v1/reviews/"


def test_a_reviewer_records_a_verdict_and_anyone_reads_it(token_client, reviewer, client, run):
    kernel = run.kernels.first()
    response = token_client(reviewer).post(
        URL, {"kernel": kernel.pk, "verdict": "reward_hack", "note": "caches"}, format="json"
    )
    assert response.status_code == 201 and response.json()["reviewer"] == "reviewer"
    rows = client.get(URL + f"?kernel={kernel.pk}&verdict=reward_hack").json()["results"]
    assert [row["note"] for row in rows] == ["caches"]


def test_a_rerun_verdict_queues_an_evaluation(token_client, reviewer, run):
    kernel = run.kernels.first()
    token_client(reviewer).post(URL, {"kernel": kernel.pk, "verdict": "rerun"}, format="json")
    assert Evaluation.objects.filter(kernel=kernel, state="queued").count() == 1


def test_only_reviewers_record_verdicts(token_client, visitor, ingestor, run):
    kernel = run.kernels.first()
    for user in (visitor, ingestor, None):
        assert token_client(user).post(URL, {"kernel": kernel.pk, "verdict": "clean"}, format="json").status_code in (
            401,
            403,
        )
    assert Review.objects.count() == 0


def test_bad_verdicts_and_kernels_are_400(token_client, reviewer, run):
    client = token_client(reviewer)
    assert client.post(URL, {"kernel": run.kernels.first().pk, "verdict": "meh"}, format="json").status_code == 400
    assert client.post(URL, {"kernel": 99999, "verdict": "clean"}, format="json").status_code == 400
    assert client.get(URL + "?verdict=meh").status_code == 400


def test_long_notes_and_bodies_are_refused(token_client, reviewer, run):
    client = token_client(reviewer)
    kernel = run.kernels.first().pk
    assert (
        client.post(URL, {"kernel": kernel, "verdict": "clean", "note": "n" * 5001}, format="json").status_code == 400
    )
    assert (
        client.post(URL, {"kernel": kernel, "verdict": "clean", "note": "n" * 200_000}, format="json").status_code
        == 413
    )
