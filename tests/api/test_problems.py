from problems.models import Problem


def test_it_lists_problems_paginated_without_sources(client, problem_set):
    body = client.get("/api/v1/problems/").json()
    assert body["count"] == 3 and body["next"] is None and body["previous"] is None
    assert "source" not in body["results"][0]
    assert body["results"][0]["problem_set"] == "kb"


def test_it_filters_by_set_level_tag_and_search(client, problem_set):
    assert client.get("/api/v1/problems/?level=2").json()["count"] == 1
    assert client.get("/api/v1/problems/?set=kb&level=1").json()["count"] == 2
    assert client.get("/api/v1/problems/?set=other").json()["count"] == 0
    assert client.get("/api/v1/problems/?tag=matmul").json()["count"] == 2
    assert [p["name"] for p in client.get("/api/v1/problems/?search=gelu").json()["results"]] == ["GELU"]


def test_detail_has_the_reference_source(client, problem_set):
    problem = Problem.objects.get(level=1, number=1)
    body = client.get(f"/api/v1/problems/{problem.pk}/").json()
    assert "class Model" in body["source"]
    assert body["tags"] == ["matmul"]


def test_bad_filters_are_400_with_the_reason(client, problem_set):
    response = client.get("/api/v1/problems/?level=9")
    assert response.status_code == 400 and "out of range" in response.json()["level"]
    assert client.get("/api/v1/problems/?level=one").status_code == 400


def test_unknown_problem_is_404(client, db):
    assert client.get("/api/v1/problems/999/").status_code == 404


def test_nobody_can_write_problems(token_client, admin_user, problem_set):
    response = token_client(admin_user).post("/api/v1/problems/", {"name": "x"}, format="json")
    assert response.status_code == 405


def test_listing_costs_a_fixed_number_of_queries(client, problem_set, django_assert_max_num_queries):
    with django_assert_max_num_queries(3):
        client.get("/api/v1/problems/")
