"""The RQ worker class that `evalworker` runs (settings.RQ["WORKER_CLASS"], read through django-rq's
get_worker_class): RQ's forking Worker, made safe for Django and quick to notice a work horse that
died."""

from __future__ import annotations

import logging
import os
import secrets
import socket
import time
from typing import Any

from django.db import connection, connections
from rq import Worker

from leaderboard.evaluations import host_space
from leaderboard.evaluations.attempts import release_running_on

#: Seconds between health checks of a worker that takes no job.
GATE_POLL_S = 2.0

log = logging.getLogger(__name__)


class EvalWorker(Worker):
    """Each job runs in a forked work horse (its own process group), as in plain RQ; the scoring
    library then starts the untrusted code in children of that horse."""

    _refusing = ""

    def dequeue_job_and_maintain_ttl(self, timeout: Any, max_idle_time: Any = None) -> Any:
        """Take a job only while this host can run and record it: folders that take a write, not
        sick (host_space.refusal), and the database answering. Meanwhile the worker
        stays registered and the jobs stay in Redis for other hosts. (An idle worker once drained
        a whole queue in 2 s into RQ's failed registry while the database was down.)"""
        while True:
            reason = self.refusal()
            if not reason:
                break
            if reason != self._refusing:
                log.warning("worker %s takes no job: %s", self.name, reason)
                self._report(reason)
            self._refusing = reason
            self.heartbeat()
            if self._stop_requested:
                return None
            time.sleep(GATE_POLL_S)
        if self._refusing:
            log.warning("worker %s takes jobs again", self.name)
            self._refusing = ""
            host_space.report()
        return super().dequeue_job_and_maintain_ttl(timeout, max_idle_time)

    def refusal(self) -> str:
        try:
            connection.ensure_connection()
            with connection.cursor() as cursor:
                cursor.execute("SELECT 1")
        except Exception as exc:
            connections.close_all()  # a fresh connection next time
            return f"the database is unreachable ({type(exc).__name__}: {str(exc).strip()[:200]})"
        finally:
            connections.close_all()  # the horse forks from here: no connection shared with it
        # Short of space, the job itself defers the evaluation, saying why on its row (jobs.py).
        return host_space.refusal(space=False)

    def _report(self, reason: str) -> None:
        """Say so where operators look, and give back what this host burned before it noticed."""
        try:
            if not reason.startswith("the database"):
                host_space.give_back(reason)
            host_space.report()
        except Exception:
            log.exception("worker %s: could not report its refusal", self.name)
        finally:
            connections.close_all()

    def fork_work_horse(self, job: Any, queue: Any) -> None:
        # The horse must open its own database connections, never share the parent's sockets.
        connections.close_all()
        super().fork_work_horse(job, queue)

    def handle_work_horse_killed(self, job: Any, retpid: Any, ret_val: Any, rusage: Any) -> None:
        super().handle_work_horse_killed(job, retpid, ret_val, rusage)
        # Killed by a signal, the out-of-memory killer or the job time limit: retry (or fail) the
        # evaluation now instead of waiting for the sweep to see its heartbeat go stale.
        try:
            released = release_running_on(self.name, f"work horse ended abnormally (wait status {ret_val})")
            if released:
                log.warning("worker %s: released %s evaluation(s) after its work horse died", self.name, released)
        except Exception:
            log.exception("worker %s: could not release the evaluation of a dead work horse; the sweep will", self.name)
        finally:
            connections.close_all()


def default_worker_name() -> str:
    """host.pid.xxxx: readable on the pages, and unique even when a restarted container gets the same
    hostname and pid (RQ refuses a name whose earlier worker's registration has not expired)."""
    return f"{socket.gethostname()}.{os.getpid()}.{secrets.token_hex(2)}"
