"""Replay issue 12's numbered repros, and issue 19's cases 1, 6 and 8 and issue 20's cases 3 and 4
(re-import of a verified kernel, writes into others' runs, per-user quotas, concurrent verifies,
concurrent imports naming a new model), and issue 19's cases 4, 5, 7, 10, 12, 13, 14 and 15 (the
front: forged X-Forwarded-For, slow clients behind the shipped nginx and at gunicorn alone, what
replies disclose, Redis apart, `kbl` against a hostile site, control characters, control sockets:
tests/integration/live_front.py), and issue 19's work budgets, cases 2, 3, 9, 10 and 11 (the
cubic diff, the quadratic JSON check, zip amplification, junk parameters in board cache keys, a
hardware rename: tests/integration/budget_cases.py), the fourth probe's import and name findings
(tests/integration/names_results_cases.py) and its unit server, unit cache and temporary folders
(tests/integration/units_round4_cases.py), against a live site and print, for each,
the statuses and whether the row counts stayed the same (for the later cases: that nothing was
written that must not be).

The site: gunicorn with 4 worker processes, redis-server as the cache (the write limit shared by
every worker), API_WRITE_RATE=10/min, on a database of its own (SQLite in a temporary folder, or
DATABASE_URL's PostgreSQL server, where a fresh database is made).

    .venv/bin/python benchmarks/hardening_replay.py
    .venv/bin/python benchmarks/hardening_replay.py --no-redis   # the cache per worker: case 5 fails
    bash tests/with-postgres.sh .venv/bin/python benchmarks/hardening_replay.py   # on PostgreSQL
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def database_url(workdir: Path) -> str:
    url = os.environ.get("DATABASE_URL", "")
    if not url.startswith("postgres"):
        return f"sqlite:///{workdir / 'replay.sqlite3'}"
    import psycopg  # deferred: only for PostgreSQL

    base, _, _name = url.rpartition("/")
    with psycopg.connect(f"{base}/postgres", autocommit=True) as connection:
        connection.execute("DROP DATABASE IF EXISTS kb_replay")
        connection.execute("CREATE DATABASE kb_replay")
    return f"{base}/kb_replay"


def replay_env(workdir: Path) -> dict[str, str]:
    """The site's environment: its own database and var folder, a low write limit and low quotas."""
    return {
        "DATABASE_URL": database_url(workdir),
        "KB_VAR_DIR": str(workdir / "var"),
        "API_WRITE_RATE": "10/min",
        "DJANGO_SETTINGS_MODULE": "config.settings",
        # Issue 19 case 8's quotas, low enough to replay (tests/integration/live_integrity.py).
        "EVAL_MAX_PENDING_PER_USER": "40",
        "KERNEL_SOURCE_MAX_BYTES_PER_USER": "300000",
        # Issue 19 case 14: loopback is not private here, so /metrics and /healthz answer as to a visitor.
        "PRIVATE_NETWORKS": "10.255.255.0/24",
    }


def replay_cases(workdir: Path, env: dict[str, str]) -> tuple[list[Any], Any]:
    """Seed the database, start the site and replay every case against it: (outcomes, the site)."""
    # deferred: Django must be set up (main) before these import models
    from django.core.management import call_command

    from tests.integration.budget_cases import BUDGET_CASES, seed_budgets
    from tests.integration.hardening_site_cases import replay_site, seed_site
    from tests.integration.live_front import replay_front, seed_front
    from tests.integration.live_integrity import replay_integrity, seed_integrity
    from tests.integration.live_site import LiveSite, replay, seed
    from tests.integration.names_results_cases import replay_names_results, seed_names_results
    from tests.integration.sandbox_round3_cases import replay_sandbox_round3
    from tests.integration.units_round4_cases import replay_units_round4

    call_command("migrate", verbosity=0)
    data = seed()
    data["integrity"] = seed_integrity()
    data["front"] = seed_front(data)
    budgets = seed_budgets(data)
    site_data = seed_site(data)  # issue 28's site cases
    names_data = seed_names_results(data)  # the fourth probe's import and name cases
    # --no-redis: local-memory cache, one count per worker (what issue 12 found: the limit leaks).
    site = LiveSite(workdir, env, workers=4, redis="--no-redis" not in sys.argv).start()
    try:
        outcomes = replay(site, data)
        # Issue 19 cases 1, 6, 8 and issue 20 cases 3, 4: "rows same" is each case's own check
        # that nothing was written that must not be (see live_integrity.py).
        outcomes += replay_integrity(site, data["integrity"])
        outcomes += replay_front(site, data)  # issue 19 cases 4, 5, 7, 10, 12, 13, 14, 15
        outcomes += replay(site, budgets, BUDGET_CASES)  # issue 19 cases 2, 3, 9, 10, 11
        outcomes += replay_sandbox_round3()  # issue 28 cases 2, 3, 4, 8: real kernels, root sandbox
        outcomes += replay_site(site, site_data)  # issue 28 cases 1, 5, 6, 7, 9, 10
        outcomes += replay_names_results(site, names_data)  # import_results as strict as the API; model names
        outcomes += replay_units_round4()  # the unit server, .units, the kernel's temporary folders
    finally:
        site.stop()
    return outcomes, site


def print_outcomes(outcomes: list[Any], env: dict[str, str], site: Any) -> int:
    """The table of cases; 1 when any case failed, else 0."""
    cache = "redis" if site.redis else "local memory (per worker)"
    print(f"database: {env['DATABASE_URL'].split('@')[-1]}; gunicorn: 4 workers; cache: {cache}; API_WRITE_RATE=10/min")
    print(f"{'case':40} {'ok':3} {'rows same':9} statuses")
    for outcome in outcomes:
        print(
            f"{outcome.case:40} {'yes' if outcome.ok else 'NO':3} {'yes' if outcome.counts_unchanged else 'NO':9} "
            f"{' '.join(map(str, outcome.statuses))}  {outcome.note}"
        )
        if not outcome.ok:
            for body in outcome.bodies:
                print("      ", body[:200].replace("\n", " "))
    failed = [o.case for o in outcomes if not (o.ok and o.counts_unchanged)]
    print("all cases hold" if not failed else f"FAILED: {', '.join(failed)}")
    return 1 if failed else 0


def main() -> int:
    workdir = Path(tempfile.mkdtemp(prefix="kb-replay-"))
    env = replay_env(workdir)
    os.environ.update(env)
    os.environ.pop("REDIS_URL", None)
    import django  # deferred: settings come from the environment set above

    django.setup()
    outcomes, site = replay_cases(workdir, env)
    return print_outcomes(outcomes, env, site)


if __name__ == "__main__":
    sys.exit(main())
