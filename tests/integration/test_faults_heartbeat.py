"""Issue 32 case 2: a heartbeat reconnects after a real PostgreSQL restart (PostgreSQL only).

The test's server (tests/with-postgres.sh) is restarted with `pg_ctl restart -m fast`, as an
operator or a failover does: every connection is closed. Before the fix the heartbeat thread kept
its dead connection ("the connection is closed" every beat), the sweep released the live attempt
as abandoned, and the attempt's result was dropped when it finished. Now a failed beat drops its
connection and the next beat opens a fresh one; the sweep leaves the attempt alone and its result
is stored.
"""

from __future__ import annotations

import glob
import os
import shlex
import subprocess
import time

import pytest
from django.db import connection

from leaderboard.evaluations.attempts import Heartbeat, claim, store_result, with_db_retries
from leaderboard.evaluations.clock import db_now
from leaderboard.evaluations.sweep import sweep_evaluations
from leaderboard.models import Evaluation

from .conftest import fake_source, submit, wait_for
from .fault_report import record

pytestmark = pytest.mark.timeout(120)

VERDICT = {"status": "correct", "compiled": True, "correct": True, "speedup": 1.5}


_DATA_DIR: list[str] = []


_SERVER_OPTIONS: list[str] = []


def pg_ctl(action: str) -> float:
    """`pg_ctl <action>` (restart, stop, start) on the test's PostgreSQL server, fast mode
    (connections are closed); seconds it took. `start` gets the options the server was started
    with (port, socket folder: tests/with-postgres.sh), as `restart` does by itself."""
    if not _DATA_DIR:
        with connection.cursor() as cursor:
            cursor.execute("SHOW data_directory")
            _DATA_DIR.append(cursor.fetchone()[0])
        with open(os.path.join(_DATA_DIR[0], "postmaster.opts")) as fh:
            words = shlex.split(fh.read())[1:]  # the postgres binary, then its options
        while words:
            word = words.pop(0)
            if word == "-D":
                words.pop(0)
            else:
                _SERVER_OPTIONS.append(word)
    data_dir = _DATA_DIR[0]
    connection.close()
    binary = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))[-1]
    log = os.path.join(os.path.dirname(data_dir), "log")
    options = ["-o", shlex.join(_SERVER_OPTIONS)] if action == "start" else []
    t0 = time.monotonic()
    subprocess.run(
        ["runuser", "-u", "postgres", "--", binary, "-D", data_dir, "-l", log, "-m", "fast", "-w", *options, action],
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        timeout=60,
    )
    return time.monotonic() - t0


def restart_postgres() -> float:
    return pg_ctl("restart")


@pytest.mark.stops_database_server
def test_a_heartbeat_reconnects_after_a_postgresql_restart(env, make_kernels, cpu, settings):
    if connection.vendor != "postgresql":
        pytest.skip("needs a database server to restart: run under tests/with-postgres.sh")
    if os.geteuid() != 0:
        pytest.skip("restarting the test's PostgreSQL needs root (runuser -u postgres)")
    settings.EVAL_STALE_AFTER_S = 3
    (evaluation,) = submit(make_kernels([fake_source("beating")]), cpu)
    c = claim(evaluation.pk, "live-host.1")
    assert c is not None

    with Heartbeat(c, 0.3):
        time.sleep(1.0)
        took = restart_postgres()
        back = db_now()
        t_back = time.monotonic()
        wait_for(
            lambda: Evaluation.objects.get(pk=evaluation.pk).heartbeat_at > back,
            timeout=15,
            message="a heartbeat after the restart",
        )
        first_beat_s = time.monotonic() - t_back
        time.sleep(settings.EVAL_STALE_AFTER_S + 1)  # longer than the stale bound: only beats keep it
        report = sweep_evaluations()
        evaluation.refresh_from_db()
        assert report.abandoned == 0 and evaluation.state == Evaluation.State.RUNNING, evaluation.failure_reason
        age = (db_now() - evaluation.heartbeat_at).total_seconds()
        assert age < settings.EVAL_STALE_AFTER_S, age

    assert with_db_retries(lambda: store_result(c, VERDICT)) is True  # the attempt's result is kept
    evaluation.refresh_from_db()
    assert (evaluation.state, evaluation.attempts) == (Evaluation.State.DONE, 1)
    record(
        "2. PostgreSQL restarted under a heartbeat",
        restart_s=round(took, 2),
        first_beat_after_restart_s=round(first_beat_s, 2),
        heartbeat_age_at_sweep_s=round(age, 2),
        released_by_sweep=report.abandoned,
        stored=evaluation.state,
    )
