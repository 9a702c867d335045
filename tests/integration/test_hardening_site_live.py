"""Issue 28's site cases (tests/integration/hardening_site_cases.py) against a live site: gunicorn
with 4 worker processes and redis-server, on the test database (SQLite here, PostgreSQL in
tests/run-suites.sh's second pass); cases 5 and 6 start a production-shaped site of their own."""

from __future__ import annotations

import pytest

from tests.integration.hardening_site_cases import replay_site, seed_site
from tests.integration.test_hardening_live import live  # noqa: F401  (the fixture)

pytestmark = pytest.mark.timeout(900)


def test_every_site_case_of_issue_28_holds(live):  # noqa: F811
    site, data = live
    outcomes = replay_site(site, seed_site(data))
    failed = [f"{o.case}: {o.statuses} (rows as they must be: {o.counts_unchanged}) {o.note} {o.bodies[:3]}"
              for o in outcomes if not (o.ok and o.counts_unchanged)]  # fmt: skip
    assert not failed, "\n".join(failed)
