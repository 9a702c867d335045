"""Issue 32 case 3: one host's clock must not decide for the fleet. Staleness, backoff and
`not_before` are computed with the database's clock (leaderboard.evaluations.clock.db_now).

The host under test is this process, acting as a sweeper and a worker whose clock is 10 minutes
ahead, then 10 minutes behind: Python's clock is faked by patching `django.utils.timezone.now`
(what every module here reads; libfaketime did the same to the whole process in the fault run).
The attempts it judges were written by other hosts with the true clock (the database's).

Before the fix, the host ahead released the live attempt on its first sweep (its heartbeat, 1 s
old, looked 10 minutes old), wrote `not_before` 10 min 30 s ahead and claimed a retry 20 s early;
the host behind kept the dead attempt (its heartbeat looked 8 minutes in the future) and refused a
retry that was due.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from leaderboard.evaluations.attempts import Claim, claim, release
from leaderboard.evaluations.clock import db_now
from leaderboard.evaluations.sweep import sweep_evaluations
from leaderboard.models import Evaluation

from .conftest import fake_source, submit
from .fault_report import record

SKEW_S = 600


@pytest.mark.parametrize("skew_s", [SKEW_S, -SKEW_S], ids=["10-min-ahead", "10-min-behind"])
def test_a_host_clock_far_off_neither_releases_live_work_nor_keeps_dead(
    env, make_kernels, cpu, settings, monkeypatch, skew_s
):
    settings.EVAL_STALE_AFTER_S = 60
    settings.EVAL_RETRY_BACKOFF_S = 30
    settings.EVAL_QUEUED_GRACE_S = 0
    live, dead, early, due_now, mine = submit(
        make_kernels([fake_source(m) for m in ("live", "dead", "early", "due", "mine")]), cpu
    )
    # Written by other hosts, by the true clock: a live attempt that beat 1 s ago, one whose worker
    # died 2 minutes ago, a retry due in 20 s and one due 1 s ago.
    true_now = db_now()
    assert claim(live.pk, "good-host.1") and claim(dead.pk, "gone-host.2") and claim(mine.pk, "good-host.3")
    Evaluation.objects.filter(pk=live.pk).update(heartbeat_at=true_now - timedelta(seconds=1))
    Evaluation.objects.filter(pk=dead.pk).update(heartbeat_at=true_now - timedelta(seconds=120))
    Evaluation.objects.filter(pk=early.pk).update(not_before=true_now + timedelta(seconds=20))
    Evaluation.objects.filter(pk=due_now.pk).update(not_before=true_now - timedelta(seconds=1))

    real_now = timezone.now
    monkeypatch.setattr(timezone, "now", lambda: real_now() + timedelta(seconds=skew_s))
    assert abs((timezone.now() - db_now()).total_seconds() - skew_s) < 5  # the fake is in force

    report = sweep_evaluations()
    live.refresh_from_db()
    dead.refresh_from_db()
    assert live.state == Evaluation.State.RUNNING, live.failure_reason  # a live attempt is never released
    assert dead.state == Evaluation.State.QUEUED and "last heartbeat" in dead.failure_reason
    assert report.abandoned == 1
    wait = (dead.not_before - db_now()).total_seconds()
    assert 25 <= wait <= 30, wait  # the backoff by the database's clock, not this host's

    assert claim(early.pk, "skewed-host.9") is None  # not due yet, whatever this host thinks
    assert claim(due_now.pk, "skewed-host.9") is not None  # due, whatever this host thinks

    assert claim(dead.pk, "skewed-host.9") is None  # its backoff has not passed
    # A retry this host queues is due after its backoff by the database's clock.
    assert release(Claim(mine.pk, 1, "good-host.3"), "test: released by the skewed host") == "queued"
    mine.refresh_from_db()
    assert 25 <= (mine.not_before - db_now()).total_seconds() <= 30
    record(
        f"3. sweeper clock {skew_s:+d} s",
        live_attempt=live.state,
        dead_attempt=f"released ({dead.state})",
        retry_wait_s=round(wait, 1),
        early_retry="not claimed",
        due_retry="claimed",
    )
