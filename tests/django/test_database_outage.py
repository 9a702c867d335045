"""Issue 20 case 5, in process: every query fails as it does when PostgreSQL is down (an
OperationalError from the driver), and pages, the API and /healthz answer 503 with Retry-After and
a short body instead of a bare 500. tests/integration/test_faults_database.py stops a real
PostgreSQL under a live gunicorn."""

from __future__ import annotations

import pytest
from django.db import OperationalError, connection
from django.test import Client

pytestmark = pytest.mark.django_db


def refuse(execute, sql, params, many, context):
    raise OperationalError('connection to server at "127.0.0.1", port 5432 failed: Connection refused')


@pytest.fixture
def down():
    with connection.execute_wrapper(refuse):
        yield Client(raise_request_exception=False)


def test_a_page_answers_503_with_retry_after_and_a_short_page(down):
    response = down.get("/")
    assert response.status_code == 503
    assert response["Retry-After"] == "5"
    assert b"The database is unavailable for a moment" in response.content
    assert len(response.content) < 1000


def test_the_api_answers_503_in_json(down):
    response = down.get("/api/v1/runs/")
    assert response.status_code == 503
    assert response["Retry-After"] == "5"
    assert response.json() == {"detail": "The database is unavailable for a moment. Try again in 5 seconds."}


def test_a_write_through_the_api_answers_503_too(down):
    response = down.post("/api/v1/labs/", {"name": "x"}, HTTP_AUTHORIZATION="Token nope")
    assert response.status_code == 503


def test_healthz_says_the_database_is_unavailable(down):
    response = down.get("/healthz")
    assert response.status_code == 503
    assert response.json()["checks"]["database"]["ok"] is False


def test_other_errors_stay_a_500():
    def bug(execute, sql, params, many, context):
        raise ValueError("a bug, not an outage")

    with connection.execute_wrapper(bug):
        response = Client(raise_request_exception=False).get("/")
    assert response.status_code == 500 and not response.has_header("Retry-After")
    assert b"Something went wrong" in response.content


def test_connections_are_checked_before_reuse(settings):
    assert settings.DATABASES["default"]["CONN_HEALTH_CHECKS"] is True
