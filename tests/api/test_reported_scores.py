import io

import pytest

from leaderboard.models import LanguageModel, ReportedScore

URL = "/api/v1/reported-scores/"
ROW = {
    "model": "GPT-4o",
    "organization": "OpenAI",
    "variant": "KernelBench v0 L1 fast_1 vs PyTorch Eager",
    "metric": "fast_1",
    "value": 4,
    "unit": "%",
    "setting": "one-shot",
    "hardware": "NVIDIA L40S",
    "date": "2025-02-14",
    "source_url": "https://arxiv.org/html/2502.10517v1",
}
HEADER = ",".join(ROW) + "\n"
CSV_ROW = ",".join(str(value) for value in ROW.values()) + "\n"


def test_anyone_reads_scores_with_filters(client, ingestor, token_client):
    token_client(ingestor).post(URL, ROW, format="json")
    rows = client.get(URL).json()["results"]
    assert rows[0]["model_name"] == "GPT-4o" and rows[0]["lab"] == "OpenAI" and rows[0]["display_value"] == "4%"
    assert "L40S" in rows[0]["caveat"]
    assert client.get(URL + "?model=gpt-4o&lab=openai&metric=fast_1&variant=L1").json()["count"] == 1
    assert client.get(URL + "?metric=fast_2").json()["count"] == 0
    assert client.get(URL + f"{rows[0]['id']}/").status_code == 200


def test_an_ingestor_posts_one_object(token_client, ingestor):
    response = token_client(ingestor).post(URL, ROW, format="json")
    assert response.status_code == 201 and response.json()["created"] == 1
    assert ReportedScore.objects.get().entered_by == ingestor


def test_posting_the_same_rows_again_changes_nothing(token_client, ingestor):
    client = token_client(ingestor)
    client.post(URL, [ROW], format="json")
    response = client.post(URL, [ROW], format="json")
    assert response.status_code == 200 and response.json()["unchanged"] == 1


def test_zero_as_a_json_number_is_a_value(token_client, ingestor):
    response = token_client(ingestor).post(URL, {**ROW, "value": 0}, format="json")
    assert response.status_code == 201 and ReportedScore.objects.get().value == 0


def test_a_csv_body_is_accepted(token_client, ingestor):
    response = token_client(ingestor).generic("POST", URL, HEADER + CSV_ROW, content_type="text/csv")
    assert response.status_code == 201, response.content


def test_a_csv_file_is_accepted(token_client, ingestor):
    upload = io.BytesIO((HEADER + CSV_ROW).encode())
    upload.name = "scores.csv"
    response = token_client(ingestor).post(URL, {"file": upload}, format="multipart")
    assert response.status_code == 201 and ReportedScore.objects.count() == 1


def test_models_match_case_insensitively(token_client, ingestor):
    LanguageModel.objects.create(name="gpt-4O")
    token_client(ingestor).post(URL, ROW, format="json")
    assert LanguageModel.objects.count() == 1


def test_one_bad_row_writes_nothing_and_every_error_is_listed(token_client, ingestor):
    rows = [ROW, {**ROW, "variant": "v2", "value": 140}, {**ROW, "variant": "v3", "date": "2999-01-01"}]
    response = token_client(ingestor).post(URL, rows, format="json")
    assert response.status_code == 400
    errors = response.json()["errors"]
    assert errors == ["row 2: value 140% is outside 0-100", "row 3: date 2999-01-01 is in the future"]
    assert ReportedScore.objects.count() == 0


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"unit": "x", "value": -1}, "not positive"),
        ({"unit": "x", "value": "inf"}, "not a finite number"),
        ({"unit": "pts"}, "is not '%' or 'x'"),
        ({"source_url": "ftp://x.org/a"}, "not an http(s) URL"),
        ({"date": "14/02/2025"}, "not YYYY-MM-DD"),
        ({"model": ""}, "missing model"),
        ({"variant": "v" * 201}, "longer than 200"),
        ({"metric": "fast\x00"}, "NUL"),
        ({"colour": "red"}, "unknown column"),
        ({"value": [1]}, "must be text or a number"),
    ],
)
def test_bad_rows_are_400_with_the_reason(token_client, ingestor, change, message):
    response = token_client(ingestor).post(URL, {**ROW, **change}, format="json")
    assert response.status_code == 400
    assert message in " ".join(response.json()["errors"])


def test_duplicate_rows_in_one_request_are_refused(token_client, ingestor):
    response = token_client(ingestor).post(URL, [ROW, {**ROW, "model": "gpt-4o"}], format="json")
    assert response.status_code == 400 and "duplicate of row 1" in response.json()["errors"][0]


def test_empty_lists_and_non_objects_are_refused(token_client, ingestor):
    client = token_client(ingestor)
    assert client.post(URL, [], format="json").status_code == 400
    assert client.post(URL, [1, "a"], format="json").json()["errors"] == [
        "row 1: is not an object",
        "row 2: is not an object",
    ]


def test_bad_json_is_400(token_client, ingestor):
    response = token_client(ingestor).generic("POST", URL, "{nope", content_type="application/json")
    assert response.status_code == 400 and "JSON parse error" in response.json()["detail"]


def test_csv_errors_name_the_line(token_client, ingestor):
    body = HEADER + CSV_ROW + CSV_ROW.replace(",4,", ",abc,").replace("fast_1 vs", "fast_2 vs")
    response = token_client(ingestor).generic("POST", URL, body, content_type="text/csv")
    assert response.status_code == 400 and response.json()["errors"] == [
        "CSV body: line 3: value 'abc' is not a number"
    ]


def test_a_csv_without_the_required_columns_is_refused(token_client, ingestor):
    response = token_client(ingestor).generic("POST", URL, "a,b\n1,2\n", content_type="text/csv")
    assert response.status_code == 400 and "header lacks" in response.json()["errors"][0]


def test_non_utf8_csv_is_refused(token_client, ingestor):
    response = token_client(ingestor).generic("POST", URL, (HEADER + CSV_ROW).encode("utf-16"), content_type="text/csv")
    assert response.status_code == 400 and "not UTF-8" in response.json()["detail"]


def test_a_multipart_post_without_a_file_is_refused(token_client, ingestor):
    response = token_client(ingestor).post(URL, {"other": "x"}, format="multipart")
    assert response.status_code == 400 and "named `file`" in response.json()["errors"][0]


def test_wrong_content_type_is_415(token_client, ingestor):
    response = token_client(ingestor).generic("POST", URL, "<xml/>", content_type="application/xml")
    assert response.status_code == 415


def test_oversized_bodies_are_413(token_client, ingestor, settings):
    settings.API_TABLE_MAX_BYTES = 100
    response = token_client(ingestor).generic("POST", URL, HEADER + CSV_ROW, content_type="text/csv")
    assert response.status_code == 413 and "limit" in response.json()["detail"]


def test_anonymous_users_cannot_write(client, db):
    assert client.post(URL, ROW, content_type="application/json").status_code in (401, 403)


def test_users_without_the_permission_cannot_write(token_client, visitor, reviewer):
    assert token_client(visitor).post(URL, ROW, format="json").status_code == 403
    assert token_client(reviewer).post(URL, ROW, format="json").status_code == 403
    assert ReportedScore.objects.count() == 0


def test_session_writes_need_csrf(client, ingestor):
    from django.test import Client

    csrf_client = Client(enforce_csrf_checks=True)
    csrf_client.force_login(ingestor)
    response = csrf_client.post(URL, ROW, content_type="application/json")
    assert response.status_code == 403 and "CSRF" in response.json()["detail"]


def test_scores_list_in_a_fixed_number_of_queries(client, token_client, ingestor, django_assert_max_num_queries):
    rows = [{**ROW, "variant": f"v{i}", "model": f"M{i}", "organization": f"L{i}"} for i in range(5)]
    token_client(ingestor).post(URL, rows, format="json")
    with django_assert_max_num_queries(3):
        client.get(URL)
