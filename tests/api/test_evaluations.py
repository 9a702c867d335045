from leaderboard.models import Evaluation


def test_it_lists_evaluations_without_logs(client, run):
    rows = client.get("/api/v1/evaluations/").json()["results"]
    assert len(rows) == 2 and "log" not in rows[0] and rows[0]["run"] == run.pk


def test_detail_has_the_log_and_environment(client, run):
    evaluation = Evaluation.objects.first()
    body = client.get(f"/api/v1/evaluations/{evaluation.pk}/").json()
    assert "log" in body and "environment" in body and body["hardware"] == "cpu"


def test_evaluations_filter(client, run):
    kernel = run.kernels.first()
    assert client.get(f"/api/v1/evaluations/?kernel={kernel.pk}").json()["count"] == 1
    assert client.get(f"/api/v1/evaluations/?run={run.pk}&hardware=cpu&state=done&origin=measured").json()["count"] == 2
    assert client.get("/api/v1/evaluations/?status=correct").json()["count"] == 1
    assert client.get("/api/v1/evaluations/?state=sleeping").status_code == 400


def test_evaluations_list_in_a_fixed_number_of_queries(client, run, django_assert_max_num_queries):
    with django_assert_max_num_queries(3):
        client.get("/api/v1/evaluations/")


def test_evaluations_are_read_only(token_client, admin_user, run):
    evaluation = Evaluation.objects.first()
    assert token_client(admin_user).patch(f"/api/v1/evaluations/{evaluation.pk}/", {}, format="json").status_code == 405


def test_detail_says_where_a_queued_evaluation_stands(client, run):
    first_kernel, second_kernel = run.kernels.order_by("pk")[:2]  # one pending evaluation per kernel
    first = Evaluation.objects.create(kernel=first_kernel, hardware=run.hardware, state="queued")
    second = Evaluation.objects.create(kernel=second_kernel, hardware=run.hardware, state="queued")
    progress = client.get(f"/api/v1/evaluations/{second.pk}/").json()["progress"]
    assert progress["position"] == 2 and progress["label"].startswith("queued, 2nd in line")
    assert client.get(f"/api/v1/evaluations/{first.pk}/").json()["progress"]["position"] == 1


def test_detail_says_why_an_evaluation_failed(client, run):
    evaluation = Evaluation.objects.first()
    Evaluation.objects.filter(pk=evaluation.pk).update(state="failed", status="", failure_reason="redis lost")
    progress = client.get(f"/api/v1/evaluations/{evaluation.pk}/").json()["progress"]
    assert progress["state"] == "failed" and progress["failure_reason"] == "redis lost"
