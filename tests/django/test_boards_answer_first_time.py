"""Every request is answered the first time: on a seeded site with nothing kept built, no page, board
variant, download or API board answers 503 "being built" (a crawl of its links and of every standard
board), and a download or the API never answers an HTML page, even when it fails. Committed
transactions (transaction=True): a request outside a transaction takes the path a site's does."""

from __future__ import annotations

import re
from collections import deque

import pytest
from django.core.cache import cache
from django.db import OperationalError, connection
from django.test import Client

from leaderboard.demo import seed_demo
from leaderboard.ops import kept_boards as kept

pytestmark = pytest.mark.django_db(transaction=True)

LINK = re.compile(r'href="(/[^"#]*)"')
SKIPPED = ("/admin/", "/static/", "/django-rq/", "/review/", "/accounts/", "/metrics", "/api/v1/schema")
MOST_PAGES = 400  # the seeded site has fewer boards than this; its kernel pages are cut off here


@pytest.fixture(scope="module")
def crawled(django_db_setup, django_db_blocker):
    """{url: (status, content type)} of a crawl of a seeded site with nothing kept built, from its
    front page and every standard board: seeded (committed, as a site's data is) and crawled once for
    the module's tests that read it (seeding and crawling take 20-35 s on PostgreSQL), the database
    emptied after it."""
    from django.core.management import call_command

    with django_db_blocker.unblock():
        seed_demo()
        cache.clear()  # nothing kept: every board's first request is its first build
        try:
            yield crawl(Client(raise_request_exception=False), ["/", *kept.standard_paths()])
        finally:
            cache.clear()
            call_command("flush", interactive=False, verbosity=0)


def _downloads_or_api(url: str) -> bool:
    return url.startswith("/api/") or "export=" in url


def crawl(client: Client, start: list[str]) -> dict[str, tuple[int, str]]:
    """{url: (status, content type)} of every same-site link reached from `start`, breadth first."""
    seen: dict[str, tuple[int, str]] = {}
    waiting = deque(start)
    while waiting and len(seen) < MOST_PAGES:
        url = waiting.popleft().replace("&amp;", "&")
        if url in seen or url.startswith(SKIPPED):
            continue
        response = client.get(url)
        seen[url] = (response.status_code, response.get("Content-Type", ""))
        if response.status_code == 200 and seen[url][1].startswith("text/html"):
            waiting.extend(LINK.findall(response.content.decode()))
    return seen


def test_no_page_of_a_seeded_site_answers_503(crawled):
    assert len(crawled) > 100
    assert set(kept.standard_paths()) <= set(crawled), "every standard board is asked for"
    refused = {url: status for url, (status, _) in crawled.items() if status >= 500}
    assert refused == {}


def test_no_download_nor_api_board_answers_html(crawled):
    asked = [url for url in crawled if _downloads_or_api(url)]
    assert any("export=" in url for url in asked) and any(url.startswith("/api/") for url in asked)
    html = {url for url in asked if crawled[url][1].startswith("text/html")}
    assert html == set()


@pytest.mark.parametrize(
    ("url", "kind"),
    [
        ("/levels/9/?export=csv", "text/csv"),
        ("/levels/9/?export=json", "application/json"),
        ("/api/v1/nope/", "application/json"),
    ],
)
def test_a_download_or_api_url_that_is_not_found_answers_in_its_kind(url, kind):
    response = Client().get(url)
    assert response.status_code == 404 and response["Content-Type"].startswith(kind)


def _refuse(execute, sql, params, many, context):
    raise OperationalError("connection refused")


@pytest.mark.parametrize(
    ("url", "kind"),
    [
        ("/levels/1/?export=csv", "text/csv"),
        ("/levels/1/?export=json", "application/json"),
        ("/api/v1/leaderboard/", "application/json"),
    ],
)
def test_a_download_while_the_database_is_down_answers_503_in_its_kind(url, kind):
    with connection.execute_wrapper(_refuse):
        response = Client(raise_request_exception=False).get(url)
    assert response.status_code == 503 and response["Content-Type"].startswith(kind)
    assert "The database is unavailable" in response.content.decode()
