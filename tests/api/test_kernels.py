from leaderboard.models import Kernel


def test_it_lists_kernels_with_their_latest_evaluation_but_not_their_source(client, run):
    rows = client.get("/api/v1/kernels/").json()["results"]
    assert len(rows) == 2 and "source" not in rows[0]
    by_problem = {row["problem_number"]: row for row in rows}
    assert by_problem[1]["latest_evaluation"]["speedup"] == 2.0 and by_problem[1]["model"] == "model-a"


def test_detail_has_the_source(client, run):
    kernel = Kernel.objects.filter(run=run).first()
    assert "class ModelNew" in client.get(f"/api/v1/kernels/{kernel.pk}/").json()["source"]


def test_kernels_filter(client, run):
    problem = run.kernels.order_by("problem__number").first().problem
    assert client.get(f"/api/v1/kernels/?run={run.pk}&level=1&model=model-a&set=kb").json()["count"] == 2
    assert client.get(f"/api/v1/kernels/?problem={problem.pk}").json()["count"] == 1
    assert client.get("/api/v1/kernels/?backend=triton").json()["count"] == 0
    assert client.get("/api/v1/kernels/?run=x").status_code == 400
    assert client.get("/api/v1/kernels/?backend=fortran").status_code == 400


def test_kernels_list_in_a_fixed_number_of_queries(client, run, django_assert_max_num_queries):
    with django_assert_max_num_queries(3):
        client.get("/api/v1/kernels/")


def test_kernels_cannot_be_written_here(token_client, admin_user, run):
    assert token_client(admin_user).post("/api/v1/kernels/", {}, format="json").status_code == 405


def test_detail_shows_imported_and_measured_evaluations_side_by_side(client, run):
    from leaderboard.models import Evaluation

    kernel = run.kernels.get(problem__number=1)
    Evaluation.objects.create(
        kernel=kernel,
        hardware=run.hardware,
        origin="imported",
        state="done",
        status="correct",
        compiled=True,
        correct=True,
        speedup=3.0,
    )
    body = client.get(f"/api/v1/kernels/{kernel.pk}/").json()
    assert sorted(e["origin"] for e in body["evaluations"]) == ["imported", "measured"]
