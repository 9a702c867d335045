"""Fault suite, issue 20 case 5: PostgreSQL goes away under a live gunicorn (2 workers, persistent
connections) for 5 seconds. Every request meanwhile answers 503 with Retry-After and a short page
(JSON under /api/), never a bare 500, and requests answer 200 again once it is back.

The outage is a TCP proxy between gunicorn and the test's PostgreSQL (tests/integration/tcp_proxy.py)
that drops every open connection and refuses new ones, as a stopped server does, without stopping
the server the rest of the suite uses. PostgreSQL only: SQLite has no server to lose.
"""

from __future__ import annotations

import time

import pytest
import requests
from django.conf import settings
from django.db import connection

from tests.integration.conftest import database_url
from tests.integration.fault_report import record
from tests.integration.live_site import LiveSite, seed
from tests.integration.tcp_proxy import TcpProxy

pytestmark = pytest.mark.timeout(180)

OUTAGE_S = 5
PAGES = ("/", "/api/v1/runs/", "/problems/")


@pytest.fixture
def site_and_proxy(transactional_db, redis_server, tmp_path):
    if connection.vendor != "postgresql":
        pytest.skip("needs a database server to lose: run under tests/with-postgres.sh")
    seed()
    s = connection.settings_dict
    proxy = TcpProxy(s.get("HOST") or "127.0.0.1", int(s.get("PORT") or 5432)).start()
    url = database_url().replace(f":{s['PORT']}/", f":{proxy.port}/")
    env = {
        "DATABASE_URL": url,
        "KB_VAR_DIR": str(tmp_path / "var"),
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "SECRET_KEY": settings.SECRET_KEY,
        "DB_CONN_MAX_AGE": "60",
    }
    site = LiveSite(tmp_path, env, workers=2, redis=False).start()
    yield site, proxy
    site.stop()
    proxy.cut()


def statuses(site: LiveSite) -> list[requests.Response]:
    return [requests.get(site.url + path, timeout=30) for path in PAGES]


def test_a_database_outage_answers_503_with_retry_after_then_200(site_and_proxy):
    site, proxy = site_and_proxy
    assert [r.status_code for r in statuses(site) + statuses(site)] == [200] * 2 * len(PAGES)

    proxy.cut()
    during: list[requests.Response] = []
    cut_at = time.monotonic()
    while time.monotonic() - cut_at < OUTAGE_S:
        during += statuses(site)
    proxy.restore()

    codes = [r.status_code for r in during]
    record("5. PostgreSQL gone for 5 s", requests=len(during), statuses={c: codes.count(c) for c in set(codes)})
    assert {r.status_code for r in during} == {503}, [(r.url, r.status_code) for r in during if r.status_code != 503]
    assert all(r.headers["Retry-After"] == "5" for r in during)
    api = [r for r in during if "/api/" in r.url]
    assert api and all(r.json()["detail"].startswith("The database is unavailable") for r in api)
    pages = [r for r in during if "/api/" not in r.url]
    assert all(b"The database is unavailable" in r.content and len(r.content) < 1000 for r in pages)

    back = time.monotonic()
    while {r.status_code for r in statuses(site)} != {200}:
        assert time.monotonic() - back < 10, "still failing 10 s after the database came back"
    record("5. PostgreSQL back", all_200_after_s=round(time.monotonic() - back, 2))
    assert [r.status_code for r in statuses(site) + statuses(site)] == [200] * 2 * len(PAGES)
