"""The sweep that loses nothing: it makes Redis agree with the database, which is the source of truth.

Phases of one sweep (sweep_evaluations):

1. release abandoned attempts: a RUNNING row whose heartbeat is older than EVAL_STALE_AFTER_S, or
   that started more than the job time limit (+ EVAL_STALE_AFTER_S) ago, is given up (retried or
   failed; leaderboard.evaluations.attempts.give_up);
2. enqueue what is due and lost: a QUEUED row older than EVAL_QUEUED_GRACE_S whose `not_before`
   has passed and whose job Redis does not hold in a state that will run it (a retry whose backoff
   ended, Redis restarted, flushed, or down at submission) is enqueued.

3. enqueue lost follow-ups: an evaluation that owes its instruments (leaderboard/evaluations/follow_up.py)
   whose follow-up job Redis does not hold in a state that will run it is enqueued again; its
   claims are counted, so this ends.

Retries wait in the database, not in RQ's scheduler: a sweeper sleeps at most until the next
retry is due (run_sweeper), so a retry starts within EVAL_SWEEP_INTERVAL_S of its time (in practice
within a second while a sweeper runs), whatever happened to RQ's scheduler or its lock.

It runs every EVAL_SWEEP_INTERVAL_S in a child of every `evalworker` (or `manage.py
sweep_evaluations --loop`), so a job whose worker died is noticed within EVAL_STALE_AFTER_S +
EVAL_SWEEP_INTERVAL_S (90 s by default) while any worker or sweeper is up. Every transition is a
conditional update: several sweepers may run at once.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import IntegrityError, close_old_connections, connection, transaction
from django.db.models import Min, Q
from redis import Redis
from rq.exceptions import NoSuchJobError
from rq.job import Job, JobStatus

from leaderboard.evaluations.attempts import attempts_left, due, give_up
from leaderboard.evaluations.clock import db_now
from leaderboard.evaluations.follow_up import enqueue_follow_up, follow_up_job_id
from leaderboard.evaluations.queue import enqueue_evaluation, job_id_for, redis_connection
from leaderboard.models import Evaluation

log = logging.getLogger(__name__)

# RQ job states in which Redis will still run the job. Not SCHEDULED: nothing here schedules jobs
# any more, and a job left in RQ's scheduled registry (by an older release) may wait there for a
# scheduler that never comes; the database says when it is due.
LIVE_JOB_STATUSES = {JobStatus.QUEUED, JobStatus.STARTED, JobStatus.DEFERRED}
FETCH_CHUNK = 500
ENQUEUE_MARK_PREFIX = "kb:eval-enqueued:"
ENQUEUE_MARK_S = 3  # longer than two sweeps racing take; a lost job is re-enqueued after it
# A sweeper woken for a retry sleeps this much past its time, so that the retry is due when it looks.
RETRY_WAKE_SLACK_S = 0.05


def dead_worker_bound_s() -> int:
    """How long a job whose worker died can stay unnoticed, while a sweeper runs."""
    return settings.EVAL_STALE_AFTER_S + settings.EVAL_SWEEP_INTERVAL_S


@dataclass
class SweepReport:
    abandoned: int = 0  # RUNNING rows whose worker stopped beating: retried or failed
    reenqueued: int = 0  # QUEUED rows Redis did not hold: enqueued again
    redis_ok: bool = True
    follow_ups: int = 0  # owed instruments whose follow-up Redis did not hold: enqueued again

    def __str__(self) -> str:
        redis = "" if self.redis_ok else " (Redis unreachable: nothing re-enqueued)"
        return (
            f"{self.abandoned} abandoned evaluation(s) released, {self.reenqueued} re-enqueued, "
            f"{self.follow_ups} instruments' follow-up(s) re-enqueued{redis}"
        )


def sweep_evaluations(now: datetime | None = None) -> SweepReport:
    """Make Redis agree with the database. Safe to run concurrently and as often as wanted."""
    close_old_connections()
    now = now or db_now()  # the database's clock: heartbeats and not_before were written by others
    report = SweepReport()
    report.abandoned = release_abandoned(now)
    report.reenqueued, report.redis_ok = reenqueue_lost(now)
    if report.redis_ok:
        report.follow_ups = reenqueue_lost_follow_ups(now)
    return report


def release_abandoned(now: datetime) -> int:
    """Phase 1: give up the RUNNING attempts whose worker stopped beating or that ran past the job
    time limit. Returns how many were released."""
    stale = now - timedelta(seconds=settings.EVAL_STALE_AFTER_S)
    overdue = now - timedelta(seconds=settings.EVAL_JOB_TIMEOUT + settings.EVAL_STALE_AFTER_S)
    abandoned = Evaluation.objects.filter(state=Evaluation.State.RUNNING).filter(
        Q(heartbeat_at__lt=stale) | Q(heartbeat_at__isnull=True, started_at__lt=stale) | Q(started_at__lt=overdue)
    )
    released = 0
    for pk, worker_name, heartbeat in abandoned.values_list("pk", "worker_name", "heartbeat_at"):
        seen = f"last heartbeat {heartbeat:%H:%M:%S}" if heartbeat else "no heartbeat"
        # Still abandoned when locked: a beat that came in meanwhile keeps the attempt alive.
        condition = Q(pk=pk, state=Evaluation.State.RUNNING, worker_name=worker_name) & (
            Q(heartbeat_at__lt=stale) | Q(heartbeat_at__isnull=True) | Q(started_at__lt=overdue)
        )
        if give_up(condition, f"worker stopped responding ({seen}) or passed the job time limit"):
            released += 1
    return released


def reenqueue_lost(now: datetime) -> tuple[int, bool]:
    """Phase 2: enqueue the due QUEUED evaluations whose job Redis does not hold (retries whose
    backoff ended, jobs Redis lost). Returns (how many were enqueued, whether Redis answered)."""
    waiting = list(
        Evaluation.objects.filter(
            state=Evaluation.State.QUEUED, queued_at__lt=now - timedelta(seconds=settings.EVAL_QUEUED_GRACE_S)
        )
        .filter(due(now))
        .values_list("pk", "job_id")
        .order_by("queued_at", "pk")
    )
    if not waiting:
        return 0, True
    try:
        held = jobs_held_by_redis([job_id for _, job_id in waiting if job_id])
    except Exception as exc:
        log.warning("sweep: Redis unreachable (%s)", exc)
        return 0, False
    reenqueued = 0
    for pk, job_id in waiting:
        if job_id and job_id in held:
            continue
        if not job_id:
            Evaluation.objects.filter(pk=pk, job_id="").update(job_id=job_id_for(pk, 1))
        if not first_to_enqueue(job_id or job_id_for(pk, 1)):
            continue  # another sweeper enqueued this very job a moment ago
        if enqueue_evaluation(pk):
            reenqueued += 1
    return reenqueued, True


def reenqueue_lost_follow_ups(now: datetime) -> int:
    """Phase 3: enqueue again the owed follow-ups whose job Redis does not hold: neither the running
    try's (`instruments_attempts`) nor the next one's. A follow-up has no heartbeat: its job counts as
    dead once RQ started it longer ago than the job time limit (RQ kills it there) and the stale limit."""
    owed = list(
        Evaluation.objects.filter(
            instruments_state=Evaluation.Instruments.QUEUED,
            finished_at__lt=now - timedelta(seconds=settings.EVAL_QUEUED_GRACE_S),
        ).values_list("pk", "instruments_attempts")
    )
    if not owed:
        return 0
    ids = {pk: (follow_up_job_id(pk, n), follow_up_job_id(pk, n + 1)) for pk, n in owed}
    try:
        dead_before = db_now() - timedelta(seconds=settings.EVAL_JOB_TIMEOUT + settings.EVAL_STALE_AFTER_S)
        held = jobs_held_by_redis([job_id for pair in ids.values() for job_id in pair], dead_before)
    except Exception as exc:
        log.warning("sweep: Redis unreachable (%s)", exc)
        return 0
    enqueued = 0
    for pk, (running, following) in ids.items():
        if running in held or following in held or not first_to_enqueue(following):
            continue
        enqueued += enqueue_follow_up(pk)
    return enqueued


def first_to_enqueue(job_id: str) -> bool:
    """Whether this sweeper is the one to enqueue `job_id` now: a key set only if absent (Redis
    SET NX) for a few seconds, so that several sweepers (or start-up sweeps at once) enqueue a
    retry once, not once each (19 jobs for 12 rows, once). True when Redis cannot say."""
    try:
        return bool(redis_connection().set(ENQUEUE_MARK_PREFIX + job_id, "1", nx=True, ex=ENQUEUE_MARK_S))
    except Exception:
        return True


def jobs_held_by_redis(job_ids: list[str], started_before: datetime | None = None) -> set[str]:
    """The ids among `job_ids` whose job Redis holds in a state that will still run it. A job RQ
    marked 'started' before `started_before` (default: EVAL_STALE_AFTER_S ago; an evaluation's job
    still queued by then never got as far as its claim, its work horse died first) is not held."""
    conn = redis_connection()
    if started_before is None:
        started_before = db_now() - timedelta(seconds=settings.EVAL_STALE_AFTER_S)
    held: set[str] = set()
    for start in range(0, len(job_ids), FETCH_CHUNK):
        jobs = _fetch_jobs(job_ids[start : start + FETCH_CHUNK], conn)
        held.update(job.id for job in jobs if job is not None and _will_run(job, started_before))
    return held


def _will_run(job: Job, started_before: datetime) -> bool:
    status = job.get_status(refresh=False)
    if status == JobStatus.STARTED and job.started_at and job.started_at < started_before:
        return False  # its horse died before the claim
    return status in LIVE_JOB_STATUSES


def _fetch_jobs(job_ids: list[str], conn: Redis) -> list[Job | None]:
    try:
        return Job.fetch_many(job_ids, connection=conn)
    except NoSuchJobError:
        # One of them is a partial hash (no payload): fetch one by one, counting that one as lost.
        return [_fetch_job(job_id, conn) for job_id in job_ids]


def _fetch_job(job_id: str, conn: Redis) -> Job | None:
    try:
        return Job.fetch(job_id, connection=conn)
    except NoSuchJobError:
        return None


def retry_given_back(hardware_slug: str) -> int:
    """Queue again the `failed` evaluations on `hardware_slug` that have attempts left because a
    broken host gave back the ones it burned (attempts.give_back_attempts). Called by the sweeper
    of a healthy host of that hardware. Returns how many were queued."""
    revived = 0
    rows = Evaluation.objects.filter(state=Evaluation.State.FAILED, hardware__slug=hardware_slug).filter(
        attempts_left()
    )
    for pk, attempts in rows.values_list("pk", "attempts"):
        try:
            with transaction.atomic():
                changed = Evaluation.objects.filter(pk=pk, state=Evaluation.State.FAILED, attempts=attempts).update(
                    state=Evaluation.State.QUEUED,
                    job_id=job_id_for(pk, attempts + 1),
                    not_before=None,
                    finished_at=None,
                    heartbeat_at=None,
                )
                if changed:
                    transaction.on_commit(lambda pk=pk: enqueue_evaluation(pk))
        except IntegrityError:  # the kernel was asked for again meanwhile: that evaluation stands
            continue
        if changed:
            log.warning("evaluation %s: retried on a healthy host (a broken host gave its attempts back)", pk)
            revived += 1
    return revived


def next_due_in(now: datetime) -> float | None:
    """Seconds until the earliest queued evaluation waiting on its `not_before` is due; None if none."""
    first = Evaluation.objects.filter(state=Evaluation.State.QUEUED, not_before__gt=now).aggregate(
        first=Min("not_before")
    )["first"]
    return None if first is None else (first - now).total_seconds()


def run_sweeper(interval_s: float, stop: threading.Event, after_each: Callable[[], None] | None = None) -> None:
    """Sweep every `interval_s` seconds until `stop` is set, and as soon as a retry is due."""
    while not stop.is_set():
        wait = interval_s
        try:
            report = sweep_evaluations()
            if report.abandoned or report.reenqueued:
                log.info("sweep: %s", report)
            if after_each:
                after_each()
            due_in = next_due_in(db_now())
            if due_in is not None:
                wait = min(wait, due_in + RETRY_WAKE_SLACK_S)
        except Exception:
            log.exception("sweep failed; trying again in %s s", interval_s)
            connection.close()
        stop.wait(wait)
