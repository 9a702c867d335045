def test_the_openapi_schema_is_served(client, db):
    response = client.get("/api/schema/?format=json")
    assert response.status_code == 200
    paths = response.json()["paths"]
    for path in ["/api/v1/leaderboard/", "/api/v1/submissions/", "/api/v1/runs/import/", "/api/v1/reported-scores/"]:
        assert path in paths


def test_the_docs_are_served_from_our_static_files(client, db):
    response = client.get("/api/docs/")
    html = response.content.decode()
    assert response.status_code == 200
    assert "/static/drf_spectacular_sidecar/swagger-ui-dist/" in html
    assert "cdn" not in html.lower()


def test_the_api_root_lists_the_endpoints(client, db):
    body = client.get("/api/v1/").json()
    assert {"problems", "runs", "kernels", "evaluations", "reported-scores", "launch-posts"} <= set(body)
