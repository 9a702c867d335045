"""?page_size= on API lists, bounded by API_MAX_PAGE_SIZE."""

import pytest

from leaderboard.models import Lab

pytestmark = pytest.mark.django_db


@pytest.fixture
def labs(db):
    for index in range(7):
        Lab.objects.create(name=f"Lab {index}")


def test_page_size_sets_the_rows_a_page(client, labs):
    body = client.get("/api/v1/labs/?page_size=2").json()
    assert len(body["results"]) == 2 and body["count"] == 7 and "page_size=2" in body["next"]


def test_page_size_is_bounded(client, labs, settings):
    settings.API_MAX_PAGE_SIZE = 3
    assert len(client.get("/api/v1/labs/?page_size=100000").json()["results"]) == 3


def test_a_bad_page_size_falls_back_to_the_default(client, labs):
    assert len(client.get("/api/v1/labs/?page_size=abc").json()["results"]) == 7
