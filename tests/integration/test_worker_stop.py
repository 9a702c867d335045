"""An idle worker stops on one SIGTERM wherever it lands, with a real Redis and the real database.

RQ's handler raises StopRequested (an Exception) from whatever line the idle worker is on. The
worker's own checks before each dequeue (the database's SELECT 1, the host's sickness in Redis)
catch exceptions to report them: one CI run's SIGTERM landed in the database check, was taken for
"the database is unreachable", and the worker then waited in RQ's blocking dequeue for minutes
(`test_the_worker_lives_through_a_redis_restart_during_a_job` timed out waiting for it to exit).
Each case here sends the signal from inside one of those checks, in this process, and expects
`work()` to return: before the fix the first case blocked in BLPOP until the alarm below."""

from __future__ import annotations

import os
import signal
import time

import pytest

from leaderboard.evaluations import host_space, rq_worker
from leaderboard.evaluations.queue import eval_queue, worker_redis_connection

pytestmark = pytest.mark.timeout(60)

GUARD_S = 20  # far beyond the check's own time: a worker still in work() by then is waiting in BLPOP


class WorkerStillWaiting(Exception):
    pass


class SigtermOnce:
    """Sends this process SIGTERM the first time it is called; its handler runs inside the caller."""

    sent = False

    def __call__(self) -> None:
        if not self.sent:
            self.sent = True
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.1)  # the handler runs here, inside the check


class _DatabaseCheckSignalled:
    """The worker's database connection, whose connection check is where the signal lands."""

    def __init__(self, real, send) -> None:
        self._real, self._send = real, send

    def ensure_connection(self) -> None:
        self._send()
        self._real.ensure_connection()

    def __getattr__(self, name):
        return getattr(self._real, name)


def _sickness_check_signalled(send):
    real = host_space.sick

    def sick() -> str:
        try:  # as the real check does: its Redis trouble is reported elsewhere
            send()
        except Exception:
            return ""
        return real()

    return sick


@pytest.mark.parametrize("where", ["the database check", "the sickness check in Redis"])
def test_an_idle_worker_stops_on_one_sigterm_that_lands_in_its_checks(env, cpu, monkeypatch, where):
    send = SigtermOnce()
    if where == "the database check":
        monkeypatch.setattr(rq_worker, "connection", _DatabaseCheckSignalled(rq_worker.connection, send))
    else:
        monkeypatch.setattr(host_space, "sick", _sickness_check_signalled(send))
    worker = rq_worker.EvalWorker([eval_queue("eval-cpu")], connection=worker_redis_connection(), name="stop-test.1")

    def still_waiting(_signum, _frame):
        raise WorkerStillWaiting(f"the worker was still in work() {GUARD_S} s after SIGTERM landed in {where}")

    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGALRM)}
    signal.signal(signal.SIGALRM, still_waiting)
    signal.alarm(GUARD_S)
    t0 = time.monotonic()
    try:
        worker.work(burst=False, with_scheduler=False)
    finally:
        signal.alarm(0)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    assert send.sent and time.monotonic() - t0 < GUARD_S
    assert worker.stop_asked


def test_the_worker_leaves_its_channel_at_once_while_its_listener_sleeps(env):
    """RQ's listener thread waits up to 60 s in get_message for a subscription once it has read an
    UNSUBSCRIBE reply, and redis-py 8's PubSubWorkerThread.stop() joins it without a limit: a SIGTERM
    landing just then kept one CI run's worker in teardown past this file's 20 s guard."""
    worker = rq_worker.EvalWorker([eval_queue("eval-cpu")], connection=worker_redis_connection(), name="stop-test.2")
    worker.subscribe()
    worker.pubsub.unsubscribe()  # the listener reads the reply, then sleeps until subscribed again
    deadline = time.monotonic() + 5
    while worker.pubsub.subscribed and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not worker.pubsub.subscribed, "the listener never read the UNSUBSCRIBE reply in 5 s"

    def still_waiting(_signum, _frame):
        raise WorkerStillWaiting(f"unsubscribe() still waited for the listener thread after {GUARD_S} s")

    previous = signal.signal(signal.SIGALRM, still_waiting)
    signal.alarm(GUARD_S)
    t0 = time.monotonic()
    try:
        worker.unsubscribe()
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    assert time.monotonic() - t0 < 3
