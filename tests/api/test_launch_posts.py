import io

import pytest

from leaderboard.models import Lab, LaunchPost

URL = "/api/v1/launch-posts/"
POST = {
    "date": "2025-06-01",
    "lab": "Lab A",
    "model": "Model A",
    "title": "Model A is here",
    "url": "https://lab-a.example/model-a",
    "lists_kernelbench": True,
    "kernelbench_score": "L1 fast_1 40%",
}
CSV = "date,lab,model,title,url,lists_kernelbench,kernelbench_score\n2025-06-01,Lab A,,Launch,https://a.example/x,no,\n"


def test_an_ingestor_posts_a_launch_post_and_anyone_reads_it(token_client, ingestor, client):
    response = token_client(ingestor).post(URL, POST, format="json")
    assert response.status_code == 201
    row = client.get(URL).json()["results"][0]
    assert row["lab"] == "lab-a" and row["model"] == "model-a" and row["lists_kernelbench"] is True
    assert client.get(URL + "?lab=lab-a&model=model-a&lists_kernelbench=true").json()["count"] == 1
    assert client.get(URL + "?lists_kernelbench=false").json()["count"] == 0
    assert client.get(URL + "?lists_kernelbench=maybe").status_code == 400


def test_posts_are_known_by_url(token_client, ingestor):
    client = token_client(ingestor)
    client.post(URL, POST, format="json")
    response = client.post(URL, {**POST, "title": "Renamed"}, format="json")
    assert response.status_code == 200 and response.json()["updated"] == 1
    assert LaunchPost.objects.get().title == "Renamed"


def test_labs_match_case_insensitively(token_client, ingestor):
    Lab.objects.create(name="LAB A")
    token_client(ingestor).post(URL, POST, format="json")
    assert Lab.objects.count() == 1


def test_csv_body_and_file(token_client, ingestor):
    client = token_client(ingestor)
    assert client.generic("POST", URL, CSV, content_type="text/csv").status_code == 201
    upload = io.BytesIO(CSV.replace("/x", "/y").encode())
    upload.name = "posts.csv"
    assert client.post(URL, {"file": upload}, format="multipart").status_code == 201
    assert LaunchPost.objects.filter(lists_kernelbench=False).count() == 2


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"date": "2999-01-01"}, "in the future"),
        ({"date": "June"}, "not a date"),
        ({"url": "javascript:alert(1)"}, "not an http(s) URL"),
        ({"lists_kernelbench": "perhaps"}, "not true or false"),
        ({"lists_kernelbench": False}, "kernelbench_score is given"),
        ({"lab": ""}, "missing lab"),
        ({"title": "t" * 301}, "longer than 300"),
        ({"extra": 1}, "unknown column"),
        ({"lab": {"name": "x"}}, "must be text"),
    ],
)
def test_bad_rows_are_400_and_write_nothing(token_client, ingestor, change, message):
    response = token_client(ingestor).post(URL, [POST | {"url": "https://ok.example/1"}, POST | change], format="json")
    assert response.status_code == 400 and message in " ".join(response.json()["errors"])
    assert LaunchPost.objects.count() == 0


def test_duplicate_urls_are_refused(token_client, ingestor):
    response = token_client(ingestor).post(URL, [POST, POST], format="json")
    assert response.status_code == 400 and "duplicate of row 1" in response.json()["errors"][0]


def test_csv_with_unknown_columns_is_refused(token_client, ingestor):
    response = token_client(ingestor).generic(
        "POST", URL, CSV.replace("kernelbench_score", "score"), content_type="text/csv"
    )
    assert response.status_code == 400 and "unknown column" in response.json()["errors"][0]


def test_permissions(token_client, client, visitor, reviewer, ingestor):
    assert client.post(URL, POST, content_type="application/json").status_code in (401, 403)
    assert token_client(visitor).post(URL, POST, format="json").status_code == 403
    assert token_client(reviewer).post(URL, POST, format="json").status_code == 403
