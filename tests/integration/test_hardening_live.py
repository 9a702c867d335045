"""Issue 12's repros against a live site: gunicorn with 4 worker processes and redis-server as the
cache, on the test database (SQLite here, PostgreSQL in tests/run-suites.sh's second pass, where
NUL reaches the database). Each repro gets a 4xx naming what is wrong, no row is written, and the
site still answers; the write limit holds across the workers."""

from __future__ import annotations

import pytest
from django.conf import settings

from tests.integration.budget_cases import BUDGET_CASES, seed_budgets
from tests.integration.conftest import database_url
from tests.integration.live_site import LiveSite, case_5_throttle_across_workers, replay, seed

pytestmark = pytest.mark.timeout(300)


@pytest.fixture
def live(transactional_db, redis_server, tmp_path):
    """(site, seeded data). redis_server only makes sure redis-server is installed; the site starts its own."""
    data = seed()
    env = {
        "DATABASE_URL": database_url(),
        "KB_VAR_DIR": str(tmp_path / "var"),
        "API_WRITE_RATE": "10/min",
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "SECRET_KEY": settings.SECRET_KEY,
    }  # the sessions seeded here must be valid there
    site = LiveSite(tmp_path, env, workers=4).start()
    yield site, data
    site.stop()


def test_every_repro_gets_a_4xx_or_a_bounded_answer_and_writes_nothing(live):
    """Issue 12's repros, then issue 19's work budgets (tests/integration/budget_cases.py) on the
    same site: one gunicorn start for both."""
    site, data = live
    outcomes = replay(site, data) + replay(site, seed_budgets(data), BUDGET_CASES)
    failed = [
        f"{o.case}: {o.statuses} (rows unchanged: {o.counts_unchanged}) {o.note} {o.bodies[:2]}"
        for o in outcomes
        if not (o.ok and o.counts_unchanged)
    ]
    assert not failed, "\n".join(failed)


def test_the_write_limit_holds_across_gunicorn_workers(live):
    site, data = live
    responses, *_rest, note, holds = case_5_throttle_across_workers(site, data)
    assert holds, note
    assert [r.status_code for r in responses].count(429) == 30
