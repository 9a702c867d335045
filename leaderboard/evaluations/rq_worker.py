"""The RQ worker class that `evalworker` runs (settings.RQ["WORKER_CLASS"], read through django-rq's
get_worker_class): RQ's forking Worker, made safe for Django and quick to notice a work horse that
died."""

from __future__ import annotations

import logging
import os
import secrets
import socket
from typing import Any

from django.db import connections
from rq import Worker

from leaderboard.evaluations.attempts import release_running_on

log = logging.getLogger(__name__)


class EvalWorker(Worker):
    """Each job runs in a forked work horse (its own process group), as in plain RQ; the scoring
    library then starts the untrusted code in children of that horse."""

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
