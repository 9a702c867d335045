def test_it_lists_sets_with_their_problem_counts(client, problem_set):
    body = client.get("/api/v1/problem-sets/").json()
    assert body["results"][0]["slug"] == "kb" and body["results"][0]["problem_count"] == 3


def test_detail_counts_problems_per_level(client, problem_set):
    body = client.get("/api/v1/problem-sets/kb/").json()
    assert body["problems_per_level"] == {"1": 2, "2": 1, "3": 0, "4": 0}


def test_unknown_set_is_404(client, db):
    assert client.get("/api/v1/problem-sets/nope/").status_code == 404


def test_anonymous_writes_are_refused(client, problem_set):
    assert client.post("/api/v1/problem-sets/", {}).status_code in (401, 403)
