"""Fault suite, issue 20 case 2: a retry runs on time whatever happens to RQ's scheduler.

Retries wait in the database (`Evaluation.not_before`) and the sweep of any live worker enqueues
them when due. Before, they waited in RQ's scheduled registry: a killed worker's scheduler lock
kept every other worker's scheduler off for a minute (and RQ retried the lock only in its 10-minute
maintenance pass), and a Redis restart crashed the scheduler process for good.

Real Redis, real workers (the fake scoring: these test the queueing), short intervals: a retry
backoff of a few seconds and a one-second sweep.
"""

from __future__ import annotations

import os
import signal
import time
from datetime import datetime, timedelta

import pytest
from django.utils import timezone
from rq import Worker

from leaderboard.evaluations import queue as jobs
from leaderboard.models import Evaluation
from leaderboard.reads.runs import run_progress

from .conftest import RedisServer, fake_source, submit, wait_for
from .fault_report import record

BACKOFF_S = 6
# What a retry may lag behind its time (or behind the first moment a worker's sweeper runs, if
# later): one sweep interval (1 s here), plus the fork of a work horse and a claim on a busy box.
# The recorded "late_s" is that lag; negative when a worker's startup sweep ran it even earlier.
LAG_S = 1 + 3


@pytest.fixture
def retry_env(env):
    env["EVAL_RETRY_BACKOFF_S"] = str(BACKOFF_S)
    return env


def released(evaluation: Evaluation) -> datetime:
    """Wait until the first attempt was given up; return when its retry is due."""

    def waiting():
        evaluation.refresh_from_db()
        return evaluation.state == Evaluation.State.QUEUED and evaluation.attempts == 1

    wait_for(waiting, timeout=60, message="the first attempt to fail")
    return timezone.now() + timedelta(seconds=BACKOFF_S)  # at the latest


def up_since(workers, proc) -> datetime:
    """Wait until the worker's sweeper child is looping (the bound holds while a sweeper runs; the
    child boots Django for seconds on a busy box); return that time."""
    wait_for(lambda: "sweeping every" in workers.output(proc), timeout=90, message="the worker's sweeper to start")
    return timezone.now()


def finished_retry(evaluation: Evaluation) -> Evaluation:
    wait_for(
        lambda: Evaluation.objects.get(pk=evaluation.pk).state == "done",
        timeout=BACKOFF_S + 60,
        message="the retry to finish",
    )
    evaluation.refresh_from_db()
    assert (evaluation.status, evaluation.attempts) == ("correct", 2)
    return evaluation


def test_a_retry_runs_on_time_after_the_worker_holding_rqs_scheduler_lock_is_killed(
    retry_env, workers, make_kernels, cpu
):
    (kernel,) = make_kernels([fake_source("lock", "raise_first")])
    first = workers.start(fake=True)  # alone, so it took RQ's scheduler lock when workers used one
    up_since(workers, first)
    (evaluation,) = submit([kernel], cpu)
    due = released(evaluation)
    assert run_progress(kernel.run).as_dict()["done"] is False  # a pending retry is not done

    os.killpg(first.pid, signal.SIGKILL)
    second = workers.start(fake=True)
    ready = up_since(workers, second)

    evaluation = finished_retry(evaluation)
    lag = (evaluation.started_at - max(due, ready)).total_seconds()
    record(
        "2. worker holding RQ's scheduler lock killed",
        backoff_s=BACKOFF_S,
        new_worker_sweeping_after_due_s=round((ready - due).total_seconds(), 2),
        retry_started_after_due_s=round((evaluation.started_at - due).total_seconds(), 2),
        late_s=round(lag, 2),
        bound_s=LAG_S,
        final=f"{evaluation.status} after {evaluation.attempts} attempts",
    )
    assert lag <= LAG_S, f"the retry started {lag:.1f} s after it was due"
    assert run_progress(kernel.run).as_dict()["done"] is True


def test_a_retry_runs_on_time_after_redis_restarts_with_persistence(
    retry_env, workers, make_kernels, cpu, settings, tmp_path
):
    redis = RedisServer(tmp_path, persistent=True)
    redis.start()
    try:
        retry_env["REDIS_URL"] = settings.REDIS_URL = redis.url
        jobs._redis.cache_clear()
        (kernel,) = make_kernels([fake_source("aof", "raise_first")])
        worker = workers.start(fake=True)
        ready = up_since(workers, worker)
        (evaluation,) = submit([kernel], cpu)
        due = released(evaluation)
        # Restart while the worker waits for work, as when a retry sat in RQ's scheduled registry (a
        # restart in the middle of RQ's own bookkeeping of a job ends the worker, and its supervisor
        # restarts it: site/compose.yaml, site/systemd).
        wait_for(
            lambda: [w.get_state() for w in Worker.all(connection=jobs.redis_connection())] == ["idle"],
            timeout=30,
            message="the worker to be idle",
        )

        redis.proc.send_signal(signal.SIGTERM)  # a clean restart: the append-only file keeps every job
        redis.proc.wait(timeout=10)
        time.sleep(1)
        redis.start()
        assert run_progress(kernel.run).as_dict()["done"] is False

        evaluation = finished_retry(evaluation)
        lag = (evaluation.started_at - max(due, ready)).total_seconds()
        record(
            "2. Redis restarted (append-only file)",
            backoff_s=BACKOFF_S,
            retry_started_after_due_s=round((evaluation.started_at - due).total_seconds(), 2),
            late_s=round(lag, 2),
            bound_s=LAG_S,
            final=f"{evaluation.status} after {evaluation.attempts} attempts",
        )
        assert lag <= LAG_S, f"the retry started {lag:.1f} s after it was due"
        assert worker.poll() is None  # the worker lived through the restart
        assert run_progress(kernel.run).as_dict()["done"] is True
    finally:
        redis.stop()
        jobs._redis.cache_clear()
