"""Issue 32 cases 5 to 8 (the smaller ones), each against real Redis and the real database:

5. a finished verdict survives a 20 s database outage (PostgreSQL stopped and started again: the
   store waits and retries for the evaluation's budget; its tries once spanned 15.5 s);
6. Redis restarted while a job runs: the worker lets its horse finish, waits for Redis, registers
   again and takes the next job (RQ's loop once quit, ending the worker);
7. a verify while Redis hangs (a server that accepts and never answers) returns within the socket
   timeout, the submission saved for the sweep (it once blocked 26.7 s for a 30 s hang);
8. a released attempt goes to the front of its queue; two sweepers that both read Redis before
   either enqueues enqueue each retry once; `/healthz` 503s carry `Retry-After`.
"""

from __future__ import annotations

import os
import signal
import socket
import threading
import time

import pytest
from django.db import OperationalError, connection, transaction

from leaderboard.evaluations import jobs as job_functions
from leaderboard.evaluations import queue as jobs
from leaderboard.evaluations import sweep
from leaderboard.evaluations.attempts import claim, release, store_result, with_db_retries
from leaderboard.models import Evaluation

from .conftest import RedisServer, fake_calls, fake_source, free_port, submit, wait_for
from .fault_report import record
from .test_faults_heartbeat import pg_ctl

pytestmark = pytest.mark.timeout(120)

VERDICT = {"status": "correct", "compiled": True, "correct": True, "speedup": 1.5}


@pytest.mark.stops_database_server
def test_a_verdict_survives_a_20_s_database_outage(env, make_kernels, cpu, settings):
    if connection.vendor != "postgresql":
        pytest.skip("needs a database server to stop: run under tests/with-postgres.sh")
    if os.geteuid() != 0:
        pytest.skip("stopping the test's PostgreSQL needs root (runuser -u postgres)")
    settings.EVAL_TIMEOUT_S = 90
    (evaluation,) = submit(make_kernels([fake_source("outage")]), cpu)
    c = claim(evaluation.pk, "w.1")
    pg_ctl("stop")
    restarted = threading.Timer(20.0, pg_ctl, args=("start",))
    restarted.start()
    t0 = time.monotonic()
    try:
        stored = with_db_retries(lambda: store_result(c, VERDICT))
    finally:
        restarted.join()
    waited = time.monotonic() - t0
    evaluation.refresh_from_db()
    assert stored and (evaluation.state, evaluation.status, evaluation.attempts) == ("done", "correct", 1)
    record(
        "5. database stopped for 20 s as a verdict is stored",
        stored_after_s=round(waited, 1),
        final=f"{evaluation.state} {evaluation.status}, {evaluation.attempts} attempt",
    )


def broken_scoring(problem_source: str, kernel_source: str, config: object = None) -> dict[str, str]:
    raise RuntimeError("the scoring broke (test)")


def test_a_failed_attempt_is_released_across_a_database_blip(env, make_kernels, cpu, settings, monkeypatch):
    settings.EVAL_FUNCTION = f"{__name__}.broken_scoring"
    (evaluation,) = submit(make_kernels([fake_source("blip-release")]), cpu)
    tries = []

    def release_once_unreachable(c, reason):
        tries.append(reason)
        if len(tries) == 1:
            raise OperationalError("the database system is shutting down (test)")
        return release(c, reason)

    monkeypatch.setattr(job_functions, "release", release_once_unreachable)
    assert job_functions.run_evaluation_job(evaluation.pk) == "retrying"
    evaluation.refresh_from_db()
    assert len(tries) == 2 and evaluation.state == "queued" and "the scoring broke" in evaluation.failure_reason


def test_the_worker_lives_through_a_redis_restart_during_a_job(env, workers, make_kernels, cpu, settings, tmp_path):
    redis = RedisServer(tmp_path)  # its own: the session's server stays up for the other tests
    redis.start()
    try:
        env["REDIS_URL"] = settings.REDIS_URL = redis.url
        jobs._redis.cache_clear()
        during, after = make_kernels([fake_source("blip", "sleep=3"), fake_source("after")])
        worker = workers.start("--no-sweep", fake=True)
        (first,) = submit([during], cpu)
        wait_for(lambda: ("start", "blip") in fake_calls(env), timeout=60, message="the job to start")
        redis.stop()  # the worker's monitor beats Redis every EVAL_HEARTBEAT_S (1 s here)
        time.sleep(2)
        redis.start()
        t0 = time.monotonic()
        (second,) = submit([after], cpu)  # Redis lost the first job; the second is a new one
        wait_for(
            lambda: Evaluation.objects.get(pk=second.pk).state == "done",
            timeout=60,
            message=f"the job after the restart:\n{workers.output(worker)}",
        )
        took = time.monotonic() - t0
        assert Evaluation.objects.get(pk=first.pk).state == "done"  # its horse stored the verdict
        assert worker.poll() is None, workers.output(worker)
        worker.send_signal(signal.SIGTERM)
        assert workers.exit_code(worker, 30) == 0, workers.output(worker)
        record("6. Redis restarted (2 s down) during a job", worker="alive", next_job_done_after_s=round(took, 1))
    finally:
        redis.stop()
        jobs._redis.cache_clear()


def test_a_verify_while_redis_hangs_returns_within_the_socket_timeout(env, make_kernels, cpu, settings):
    hung = socket.socket()
    hung.bind(("127.0.0.1", free_port()))
    hung.listen(16)  # connections complete in the kernel's backlog; nothing ever answers
    settings.REDIS_URL = f"redis://127.0.0.1:{hung.getsockname()[1]}/0"
    jobs._redis.cache_clear()
    kernels = make_kernels([fake_source("hung")])
    t0 = time.monotonic()
    try:
        (evaluation,) = submit(kernels, cpu)
    finally:
        took = time.monotonic() - t0
        hung.close()
        jobs._redis.cache_clear()
    evaluation.refresh_from_db()
    assert evaluation.state == "queued"  # saved: the sweep enqueues it once Redis answers
    assert took < jobs.REDIS_SOCKET_TIMEOUT_S + 3, took
    record("7. verify while Redis hangs", returned_after_s=round(took, 2), row=evaluation.state)


def test_a_released_attempt_goes_to_the_front_of_its_queue(env, make_kernels, cpu, settings):
    settings.EVAL_RETRY_BACKOFF_S = 0
    first, *rest = submit(make_kernels([fake_source(f"f{i}") for i in range(4)]), cpu)
    c = claim(first.pk, "w.1")
    jobs.eval_queue("eval-cpu").remove(f"evaluation-{first.pk}-1")  # the worker took it off the queue
    with transaction.atomic():
        assert release(c, "test: worker lost its database") == "queued"
    ids = jobs.eval_queue("eval-cpu").get_job_ids()
    assert ids[0] == f"evaluation-{first.pk}-2", ids
    assert ids[1:] == [f"evaluation-{e.pk}-1" for e in rest]


def test_two_sweepers_enqueue_each_retry_once(env, make_kernels, cpu, monkeypatch):
    evaluations = submit(make_kernels([fake_source(f"s{i}") for i in range(12)]), cpu)
    jobs.redis_connection().flushall()  # Redis lost every job
    # Both sweepers read Redis's job states before either enqueues (the race of the fault run).
    monkeypatch.setattr(sweep, "jobs_held_by_redis", lambda job_ids: set())
    reports = [sweep.sweep_evaluations(), sweep.sweep_evaluations()]
    enqueued = sum(r.reenqueued for r in reports)
    assert enqueued == len(evaluations), [str(r) for r in reports]
    assert jobs.eval_queue("eval-cpu").count == len(evaluations)
    record("8. two sweepers, 12 lost jobs", enqueued=enqueued)


def test_healthz_503_says_when_to_retry(env, client, settings):
    settings.REDIS_URL = f"redis://127.0.0.1:{free_port()}/0"  # nothing listens there
    response = client.get("/healthz")
    assert response.status_code == 503 and response["Retry-After"] == "5"
    assert Evaluation.objects.count() == 0
