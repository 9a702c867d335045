"""The RQ worker class that `evalworker` runs (settings.RQ["WORKER_CLASS"], read through django-rq's
get_worker_class): RQ's forking Worker, made safe for Django, quick to notice a work horse that
died, and able to outlive Redis going away under a running job (RQ's loop quits on any Redis
error outside its dequeue: `evalworker` then calls `ride_out_redis_loss` and works again)."""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import signal
import socket
import time
from collections.abc import Iterator
from typing import Any

from django.conf import settings
from django.db import connection, connections
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError
from rq import Worker
from rq.exceptions import StopRequested
from rq.executions import Execution
from rq.registry import StartedJobRegistry
from rq.utils import now as rq_now

from evaluation.results.harness_id import harness_digest
from evaluation.sandbox.orphans import remove_group_trees
from leaderboard.evaluations import host_space
from leaderboard.evaluations.attempts import live_job_ids, release_running_on
from leaderboard.evaluations.queue import redis_connection

#: Seconds between health checks of a worker that takes no job.
GATE_POLL_S = 2.0
#: Redis errors that end RQ's loop without ending the worker.
REDIS_ERRORS = (RedisConnectionError, RedisTimeoutError)
#: Longest wait between two pings of a Redis that went away.
REDIS_WAIT_MAX_S = 10.0

log = logging.getLogger(__name__)


class EvalWorker(Worker):
    """Each job runs in a forked work horse (its own process group), as in plain RQ; the scoring
    library then starts the untrusted code in children of that horse."""

    _refusing = ""
    #: The Redis error that ended RQ's loop, if one did (see ride_out_redis_loss).
    redis_lost: BaseException | None = None

    def dequeue_job_and_maintain_ttl(self, timeout: Any, max_idle_time: Any = None) -> Any:
        """Take a job only while this host can run and record it: folders above EVAL_MIN_FREE_MB
        that take a write, not sick (host_space.refusal), and the database answering. A steady
        refusal is logged and reported once (host_space.steady), not at every poll. Meanwhile the worker
        stays registered and the jobs stay in Redis for other hosts. (An idle worker once drained
        a whole queue in 2 s into RQ's failed registry while the database was down.)

        A SIGTERM while idle reaches RQ's handler, which raises StopRequested wherever the worker
        is: the checks below let it through, and a stop asked meanwhile is honoured before the
        blocking dequeue (a worker once swallowed it in the database check and waited in BLPOP)."""
        while True:
            reason = self.refusal()
            if not reason:
                break
            if host_space.steady(reason) != host_space.steady(self._refusing):
                log.warning("worker %s takes no job: %s", self.name, reason)
                self._report(reason)
                self._refusing = reason
            self.heartbeat()
            if self.stop_asked:
                return None
            time.sleep(GATE_POLL_S)
        if self._refusing:
            log.warning("worker %s takes jobs again", self.name)
            self._refusing = ""
            host_space.report()
        if self.stop_asked:
            return None
        return super().dequeue_job_and_maintain_ttl(timeout, max_idle_time)

    def refusal(self) -> str:
        try:
            connection.ensure_connection()
            with connection.cursor() as cursor:
                cursor.execute("SELECT 1")
        except StopRequested:
            raise
        except Exception as exc:
            connections.close_all()  # a fresh connection next time
            return f"the database is unreachable ({type(exc).__name__}: {str(exc).strip()[:200]})"
        finally:
            connections.close_all()  # the horse forks from here: no connection shared with it
        # Short of space too: a job taken only to be deferred (13 in 0.6 s once, each back 30 s
        # later) is a job another host with room could run now.
        return host_space.refusal()

    def _report(self, reason: str) -> None:
        """Say so where operators look, and give back what this host burned before it noticed."""
        try:
            if not reason.startswith("the database"):
                host_space.give_back(reason)
            host_space.report()
        except StopRequested:
            raise
        except Exception:
            log.exception("worker %s: could not report its refusal", self.name)
        finally:
            connections.close_all()

    def clean_registries(self) -> None:
        """RQ's maintenance (every 10 minutes, by one worker per queue), except that a started job
        whose attempt the database says is alive is never moved to the failed registry.

        RQ fails a started job whose registry score (the running host's clock plus 90 s, renewed
        by its heartbeats) is behind the cleaning host's clock: a cleaner ahead of the fleet, or
        a job's host behind it, failed another worker's running job (its verdict was stored; RQ's
        bookkeeping and dashboard were wrong). So the live ones are first moved past this host's
        clock (keep_live_jobs_started); dead ones are failed as before. Without the database no
        registry is cleaned this time."""
        try:
            kept = keep_live_jobs_started(self.queues)
        except StopRequested:
            raise
        except Exception as exc:
            log.warning("worker %s: registries not cleaned (cannot tell live jobs: %s)", self.name, exc)
            self.last_cleaned_at = rq_now()
            return
        finally:
            connections.close_all()  # the horse forks from here: no connection shared with it
        if kept:
            log.info("worker %s: kept %d live job(s) RQ's clock would have failed", self.name, kept)
        super().clean_registries()

    def fork_work_horse(self, job: Any, queue: Any) -> None:
        # The horse must open its own database connections, never share the parent's sockets.
        connections.close_all()
        super().fork_work_horse(job, queue)

    def handle_work_horse_killed(self, job: Any, retpid: Any, ret_val: Any, rusage: Any) -> None:
        super().handle_work_horse_killed(job, retpid, ret_val, rusage)
        self.horse_died(retpid, ret_val)

    def horse_died(self, pid: int | None, ret_val: Any) -> None:
        """Killed by a signal, the out-of-memory killer or the job time limit: remove the sandbox
        folders it could not (named by its process group: evaluation.sandbox.orphans.remove_group_trees),
        and retry (or fail) the evaluation now instead of waiting for the sweep to see its heartbeat
        go stale."""
        if pid:
            try:
                for path in remove_group_trees(pid):
                    log.warning("worker %s: removed %s, left by its dead work horse", self.name, path)
            except Exception:
                log.exception("worker %s: could not remove the folders of its dead work horse", self.name)
        try:
            released = release_running_on(self.name, f"work horse ended abnormally (wait status {ret_val})")
            if released:
                log.warning("worker %s: released %s evaluation(s) after its work horse died", self.name, released)
        except Exception:
            log.exception("worker %s: could not release the evaluation of a dead work horse; the sweep will", self.name)
        finally:
            connections.close_all()

    # -- Redis going away under RQ's loop -------------------------------------------------------
    @contextlib.contextmanager
    def _noting_redis_loss(self) -> Iterator[None]:
        try:
            yield
        except REDIS_ERRORS as exc:
            self.redis_lost = exc
            raise

    def execute_job(self, job: Any, queue: Any) -> None:
        # Digest the scoring code here, once: each job's forked work horse inherits it instead of
        # reading the package's ~50 files again (a deploy restarts the workers with the new code).
        harness_digest()
        with self._noting_redis_loss():  # RQ's monitor_work_horse beats Redis while the horse works
            super().execute_job(job, queue)

    def heartbeat(self, *args: Any, **kwargs: Any) -> None:
        with self._noting_redis_loss():
            super().heartbeat(*args, **kwargs)

    def unsubscribe(self) -> None:
        """RQ's, with the wait for its listener thread bounded. RQ starts that thread with a 60 s
        sleep: once it has read the UNSUBSCRIBE reply it waits up to 60 s to be subscribed again,
        and redis-py 8's PubSubWorkerThread.stop() joins it without a limit, so a worker stopping
        just then sat in teardown for up to a minute. The thread is a daemon and ends at its next
        wake; clearing its flag first is what stop() does, without the join."""
        thread = self.pubsub_thread
        if thread is None:
            return
        log.info("worker %s: unsubscribing from channel %s", self.name, self.pubsub_channel_name)
        thread._running.clear()
        self.pubsub.unsubscribe()
        thread.join(timeout=1)
        self.pubsub.close()

    @property
    def stop_asked(self) -> bool:
        """SIGTERM or SIGINT reached RQ's handler (which may itself have failed on Redis)."""
        return bool(self._stop_requested or self._shutdown_requested_date)

    def ride_out_redis_loss(self) -> bool:
        """After Redis went away under RQ's loop: let the running horse finish (never two evaluations
        at once on this host), wait until Redis answers, and end this registration so that the same
        name registers again. False when SIGTERM or SIGINT came, before or meanwhile (the horse is
        still waited for; a second signal kills it)."""
        signals = _Signals(self._horse_pid, 1 if self.stop_asked else 0)
        previous = {sig: signal.signal(sig, signals.note) for sig in (signal.SIGTERM, signal.SIGINT)}
        try:
            self.outlive_horse()
            if not signals.count:
                wait_for_redis(signals)
            if signals.count:
                return False
            for end in (self.unsubscribe, self.register_death):
                with contextlib.suppress(Exception):
                    end()
            return True
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def outlive_horse(self) -> None:
        pid, self._horse_pid = self._horse_pid, 0
        if not pid:
            return
        log.warning("worker %s: Redis went away during a job; waiting for work horse %s", self.name, pid)
        try:
            _, status = os.waitpid(pid, 0)
        except ChildProcessError:
            return
        if status != 0:
            self.horse_died(pid, status)


class _Signals:
    """SIGTERM/SIGINT while the worker rides out a Redis loss: the first stops it once its horse
    is done, a second kills the horse's process group (RQ's cold shutdown)."""

    def __init__(self, horse_pid: int, count: int) -> None:
        self.horse_pid, self.count = horse_pid, count

    def note(self, signum: int, _frame: Any) -> None:
        self.count += 1
        if self.count > 1 and self.horse_pid:
            with contextlib.suppress(OSError):
                os.killpg(self.horse_pid, signal.SIGKILL)


def wait_for_redis(signals: _Signals) -> None:
    """Ping Redis (with the request's socket timeouts) until it answers, backing off up to
    REDIS_WAIT_MAX_S, or until a signal comes."""
    wait = 0.5
    while not signals.count:
        try:
            redis_connection().ping()
            log.warning("Redis answers again")
            return
        except Exception as exc:
            log.warning("Redis is unreachable (%s); trying again in %.1f s", exc, wait)
        deadline = time.monotonic() + wait
        while not signals.count and time.monotonic() < deadline:
            time.sleep(0.1)
        wait = min(REDIS_WAIT_MAX_S, wait * 2)


def keep_live_jobs_started(queues: list[Any]) -> int:
    """Move the started-registry entries that this host's clock takes for expired, and whose
    attempt is alive by the database (attempts.live_job_ids), to EVAL_STALE_AFTER_S past this
    host's clock (their own host's next heartbeat sets them back to its own). How many."""
    kept = 0
    for queue in queues:
        registry = StartedJobRegistry(queue.name, connection=queue.connection, job_class=queue.job_class,
                                      serializer=queue.serializer)  # fmt: skip
        expired = set(registry.get_expired_job_ids())
        live = live_job_ids(sorted(expired))
        if not live:
            continue
        with queue.connection.pipeline() as pipe:
            for job_id, execution_id in registry.get_job_and_execution_ids(cleanup=False):
                if job_id in live:
                    execution = Execution(execution_id, job_id, connection=queue.connection)
                    registry.add_execution(execution, pipe, ttl=settings.EVAL_STALE_AFTER_S, xx=True)
                    kept += 1
            pipe.execute()
    return kept


def default_worker_name() -> str:
    """host.pid.xxxx: readable on the pages, and unique even when a restarted container gets the same
    hostname and pid (RQ refuses a name whose earlier worker's registration has not expired)."""
    return f"{socket.gethostname()}.{os.getpid()}.{secrets.token_hex(2)}"
