from leaderboard.models import Run


def test_it_lists_runs_with_model_hardware_and_kernel_count(client, run):
    row = client.get("/api/v1/runs/").json()["results"][0]
    assert row["model"] == "model-a" and row["hardware"] == "cpu" and row["problem_set"] == "kb"
    assert row["kernel_count"] == 2 and row["origin"] == "measured"


def test_runs_filter(client, run):
    assert client.get("/api/v1/runs/?model=model-a&hardware=cpu&set=kb&lab=lab-a&setting=one-shot").json()["count"] == 1
    assert client.get("/api/v1/runs/?origin=imported").json()["count"] == 0
    assert client.get("/api/v1/runs/?hardware=h200").json()["count"] == 0


def test_a_bad_origin_is_400(client, run):
    response = client.get("/api/v1/runs/?origin=guessed")
    assert response.status_code == 400 and "measured" in response.json()["origin"]


def test_detail(client, run):
    assert client.get(f"/api/v1/runs/{run.pk}/").json()["id"] == run.pk
    assert client.get("/api/v1/runs/0/").status_code == 404


def test_runs_list_in_a_fixed_number_of_queries(client, run, django_assert_max_num_queries):
    for _ in range(5):
        Run.objects.create(model=run.model, problem_set=run.problem_set, hardware=run.hardware)
    client.get("/api/v1/runs/")  # the first read re-scores the runs written in this test's transaction
    with django_assert_max_num_queries(4):  # + the read model's dirty-runs check
        client.get("/api/v1/runs/")
