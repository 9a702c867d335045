"""The evaluation lifecycle: claim, run, store; retries; the sweep that loses nothing.

States (Evaluation.State) and who moves them:

    QUEUED --claim()--> RUNNING --store_result()--> DONE   (a verdict, whatever it is)
                           |
                           +--infrastructure failure / worker died--> QUEUED (retry, with backoff)
                           |                                          or FAILED (attempts used up)

* An attempt is claimed with one conditional UPDATE (state QUEUED -> RUNNING, attempts + 1), so two
  copies of a job (Redis re-delivery, a sweep re-enqueue) never run the same attempt twice.
* The result is written in one transaction that first re-reads the row under a lock and checks that
  it is still this attempt's: a late result from an attempt the sweep gave up on is dropped, never
  mixed into another attempt's.
* Kernel failures (compile error, wrong answer, timeout, crash of the kernel's process) are results:
  state DONE with that status. Only failures of our side (exception in the worker or the scoring
  library, job time limit, database or Redis trouble, worker killed) are retried.
* While an attempt runs, a thread refreshes `heartbeat_at` every EVAL_HEARTBEAT_S seconds. The sweep
  (every EVAL_SWEEP_INTERVAL_S, in a child of every `evalworker`, or `manage.py sweep_evaluations`)
  treats a RUNNING row whose heartbeat is older than EVAL_STALE_AFTER_S, or that started more than
  the job time limit (+ grace) ago, as abandoned, and retries or fails it. So a job whose worker died
  is noticed within EVAL_STALE_AFTER_S + EVAL_SWEEP_INTERVAL_S (90 s by default) while any worker
  (or a sweeper) is up. The sweep also re-enqueues QUEUED rows whose job Redis no longer holds.
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import OperationalError, close_old_connections, connection, transaction
from django.db.models import Case, F, IntegerField, Q, Subquery, When
from django.utils import timezone
from django.utils.module_loading import import_string

from config.env import env_int, env_str
from evaluation import EvaluationConfig
from leaderboard.evaluations.queue import enqueue_evaluation, job_id_for, redis_connection
from leaderboard.models import Evaluation, Kernel

log = logging.getLogger(__name__)

LOG_MAX_CHARS = 100_000


# --- knobs -------------------------------------------------------------------------------------
# Read from Django settings when defined there, else from the environment, else the default, so a
# worker host can tune them in its env file.


def _knob_int(name: str, default: int) -> int:
    value = getattr(settings, name, None)
    return int(value) if value is not None else env_int(name, default)


def max_attempts() -> int:
    return _knob_int("EVAL_MAX_ATTEMPTS", 3)


def retry_backoff_s() -> int:
    """First retry waits this long; each further retry waits twice as long as the one before."""
    return _knob_int("EVAL_RETRY_BACKOFF_S", 30)


def heartbeat_s() -> int:
    return _knob_int("EVAL_HEARTBEAT_S", 10)


def stale_after_s() -> int:
    return _knob_int("EVAL_STALE_AFTER_S", 60)


def sweep_interval_s() -> int:
    return _knob_int("EVAL_SWEEP_INTERVAL_S", 30)


def queued_grace_s() -> int:
    """A QUEUED row younger than this is left alone by the sweep (its on-commit enqueue may be in flight)."""
    return _knob_int("EVAL_QUEUED_GRACE_S", 15)


def evaluation_timeout_s() -> int:
    """The scoring library's budget for one kernel (build included); under the RQ job limit."""
    return _knob_int("EVAL_TIMEOUT_S", max(30, min(900, settings.EVAL_JOB_TIMEOUT // 2)))


def evaluation_function() -> Callable[..., Any]:
    """The function that scores a kernel: `evaluation.evaluate` unless EVAL_FUNCTION names another
    (the integration tests use a cheap fake to test the queueing, not the scoring)."""
    path = getattr(settings, "EVAL_FUNCTION", None) or env_str("EVAL_FUNCTION", "evaluation.evaluate")
    return import_string(path)


def dead_worker_bound_s() -> int:
    """How long a job whose worker died can stay unnoticed, while a sweeper runs."""
    return stale_after_s() + sweep_interval_s()


def default_worker_name() -> str:
    """host.pid.xxxx: readable on the pages, and unique even when a restarted container gets the same
    hostname and pid (RQ refuses a name whose earlier worker's registration has not expired)."""
    return f"{socket.gethostname()}.{os.getpid()}.{secrets.token_hex(2)}"


def current_worker_name() -> str:
    # Inside an RQ work horse RQ_WORKER_ID names the worker; elsewhere (tests, shell) host.pid.
    return os.environ.get("RQ_WORKER_ID") or f"{socket.gethostname()}.{os.getpid()}"


# --- claiming ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Claim:
    evaluation_id: int
    attempt: int
    worker_name: str


def claim(evaluation_id: int, worker_name: str, job_id: str = "") -> Claim | None:
    """Atomically move a QUEUED evaluation to RUNNING for one new attempt; None if someone else has
    it, it is finished, or its attempts are used up."""
    now = timezone.now()
    fields: dict[str, Any] = dict(
        state=Evaluation.State.RUNNING,
        attempts=F("attempts") + 1,
        worker_name=worker_name[:200],
        started_at=now,
        heartbeat_at=now,
    )
    if job_id:
        fields["job_id"] = job_id[:64]
    claimed = Evaluation.objects.filter(
        pk=evaluation_id, state=Evaluation.State.QUEUED, attempts__lt=max_attempts()
    ).update(**fields)
    if not claimed:
        return None
    attempt = Evaluation.objects.values_list("attempts", flat=True).get(pk=evaluation_id)
    return Claim(evaluation_id, attempt, worker_name)


def _mine(c: Claim) -> Q:
    return Q(pk=c.evaluation_id, state=Evaluation.State.RUNNING, attempts=c.attempt, worker_name=c.worker_name)


class Heartbeat:
    """Refresh `heartbeat_at` of the claimed row every few seconds, from a thread of its own (with
    its own database connection), until stopped."""

    def __init__(self, c: Claim, interval_s: float) -> None:
        self.claim, self.interval_s = c, interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name=f"heartbeat-{c.evaluation_id}", daemon=True)

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _beat(self) -> None:
        try:
            while not self._stop.wait(self.interval_s):
                try:
                    Evaluation.objects.filter(_mine(self.claim)).update(heartbeat_at=timezone.now())
                except Exception as exc:  # a missed beat is harmless; many in a row mean the sweep retries
                    log.warning("heartbeat of evaluation %s failed: %s", self.claim.evaluation_id, exc)
        finally:
            connection.close()


# --- running one attempt -----------------------------------------------------------------------


def run_evaluation(evaluation_id: int) -> str:
    """Claim, evaluate, store. The body of the RQ job; safe to run any number of times."""
    close_old_connections()
    job_id = os.environ.get("RQ_JOB_ID", "")
    worker_name = current_worker_name()
    t0 = time.monotonic()
    c = claim(evaluation_id, worker_name, job_id)
    claim_s = time.monotonic() - t0
    if c is None:
        log.info("evaluation %s: nothing to do (not queued, or claimed elsewhere)", evaluation_id)
        return "skipped"
    log.info("evaluation %s: attempt %s on %s", evaluation_id, c.attempt, worker_name)
    try:
        with Heartbeat(c, heartbeat_s()):
            t1 = time.monotonic()
            problem_source, kernel_source, config = _load(evaluation_id)
            load_s = time.monotonic() - t1
            t2 = time.monotonic()
            result = evaluation_function()(problem_source, kernel_source, config)
            evaluate_s = time.monotonic() - t2
            data = result.to_dict() if hasattr(result, "to_dict") else dict(result)
            worker_stages = {"db_claim": claim_s, "db_load": load_s, "evaluate": evaluate_s}
            stored = _with_db_retries(lambda: store_result(c, data, worker_stages))
    except Exception as exc:
        log.exception("evaluation %s: attempt %s failed on our side", evaluation_id, c.attempt)
        release(c, f"{type(exc).__name__}: {exc}")
        return "retrying"
    return "done" if stored else "dropped"


def _load(evaluation_id: int) -> tuple[str, str, Any]:
    ev = Evaluation.objects.select_related("kernel__problem__problem_set", "hardware").get(pk=evaluation_id)
    problem = ev.kernel.problem
    options: dict[str, Any] = dict(
        device="cuda" if ev.hardware.kind == ev.hardware.Kind.GPU else "cpu",
        timeout_s=float(evaluation_timeout_s()),
        atol=problem.problem_set.atol,
        rtol=problem.problem_set.rtol,
        # The site's private files (database, secret key, uploads) are not even visible to kernels.
        hide_paths=(str(settings.VAR_DIR),),
    )
    for name, key in (
        ("EVAL_CORRECTNESS_TRIALS", "correctness_trials"),
        ("EVAL_TIMING_TRIALS", "timing_trials"),
        ("EVAL_SIZE_SCALE", "size_scale"),  # problem sizes (KB_SCALE of the catalogue): 16 on an H200
    ):
        value = getattr(settings, name, None) or os.environ.get(name)
        if value:
            options[key] = int(value)
    return problem.source, ev.kernel.source, EvaluationConfig(**options)


def _with_db_retries(fn: Callable[[], bool], tries: int = 5) -> bool:
    """Run `fn`, retrying database errors (SQLite 'database is locked', a dropped PostgreSQL
    connection) with short backoff: an evaluation is too costly to redo over a transient lock."""
    for attempt in range(1, tries + 1):
        try:
            return fn()
        except OperationalError:
            if attempt == tries:
                raise
            log.warning("database error storing a result; retry %s/%s", attempt, tries - 1, exc_info=True)
            connection.close()
            time.sleep(0.5 * 2**attempt)
    raise AssertionError("unreachable")


RESULT_FIELDS = (
    "compiled",
    "correct",
    "max_abs_diff",
    "max_rel_diff",
    "trials_passed",
    "trials_total",
)


def store_result(c: Claim, data: dict[str, Any], worker_stages: dict[str, float] | None = None) -> bool:
    """Write one attempt's verdict, all or nothing. False (and nothing written) if the row is no
    longer this attempt's (the sweep gave up on it and another attempt owns it)."""
    t0 = time.monotonic()
    with transaction.atomic():
        ev = Evaluation.objects.select_for_update().filter(_mine(c)).first()
        if ev is None:
            log.warning("evaluation %s: attempt %s is no longer current; result dropped", c.evaluation_id, c.attempt)
            return False
        status = data.get("status")
        if status not in Evaluation.Status.values:
            raise ValueError(f"the scoring library returned an unknown status {status!r}")
        for name in RESULT_FIELDS:
            setattr(ev, name, data.get(name))
        ev.trials_passed = data.get("trials_passed") or 0
        ev.trials_total = data.get("trials_total") or 0
        ev.status = status
        ev.correct = bool(data.get("correct")) and status == Evaluation.Status.CORRECT
        speedup = data.get("speedup")
        ev.speedup = float(speedup) if ev.correct and speedup and speedup > 0 else None
        interval = data.get("speedup_interval") if ev.speedup else None
        ev.speedup_low, ev.speedup_high = (interval[0], interval[1]) if interval else (None, None)
        ev.kernel_timing = data.get("kernel_ms") or {}
        ev.reference_timing = data.get("reference_ms") or {}
        ev.kernel_ms = ev.kernel_timing.get("median")
        ev.reference_ms = ev.reference_timing.get("median")
        ev.flags = data.get("flags") or []
        ev.notes = data.get("notes") or []
        ev.error = (data.get("error") or "")[:LOG_MAX_CHARS]
        ev.log = (data.get("log") or "")[-LOG_MAX_CHARS:]
        ev.environment = data.get("environment") or {}
        stages = {f"eval_{k}": v for k, v in (data.get("timings_s") or {}).items()}
        stages.update({f"worker_{k}": round(v, 4) for k, v in (worker_stages or {}).items()})
        if ev.started_at:
            stages["queue_wait"] = round((ev.started_at - ev.queued_at).total_seconds(), 4)
        stages["build_cached"] = bool(data.get("build_cached"))
        ev.state = Evaluation.State.DONE
        ev.finished_at = timezone.now()
        ev.heartbeat_at = None
        stages["worker_db_store"] = round(time.monotonic() - t0, 4)
        ev.stage_seconds = stages
        ev.save()
        refresh_latest_evaluation(ev.kernel_id)
    return True


def refresh_latest_evaluation(kernel_id: int) -> None:
    """Point the kernel at the evaluation rankings should use: the newest finished one on its run's
    hardware (any hardware if none there yet). Newest by request time, so a slow old evaluation
    finishing late does not hide a newer one."""
    run_hardware = Kernel.objects.filter(pk=kernel_id).values("run__hardware_id")[:1]
    newest = (
        Evaluation.objects.filter(kernel_id=kernel_id, state=Evaluation.State.DONE)
        .annotate(
            on_run_hardware=Case(
                When(hardware_id=Subquery(run_hardware), then=1), default=0, output_field=IntegerField()
            )
        )
        .order_by("-on_run_hardware", "-queued_at", "-pk")
        .values_list("pk", flat=True)
        .first()
    )
    Kernel.objects.filter(pk=kernel_id).update(latest_evaluation_id=newest)


# --- failures and retries ----------------------------------------------------------------------


def backoff_for(attempt: int) -> int:
    return retry_backoff_s() * 2 ** max(0, attempt - 1)


def release(c: Claim, reason: str) -> str:
    """An infrastructure failure ended this attempt: queue a retry after a backoff, or fail the
    evaluation when its attempts are used up. Returns the new state ('' if the row was not ours)."""
    return _give_up_attempt(_mine(c), reason)


def _give_up_attempt(condition: Q, reason: str) -> str:
    with transaction.atomic():
        ev = Evaluation.objects.select_for_update().filter(condition).first()
        if ev is None:
            return ""
        reason = f"attempt {ev.attempts} on {ev.worker_name or 'unknown worker'}: {reason}"[:2000]
        if ev.attempts >= max_attempts():
            ev.state = Evaluation.State.FAILED
            ev.failure_reason = f"gave up after {ev.attempts} attempts; last: {reason}"
            ev.finished_at = timezone.now()
            ev.heartbeat_at = None
            ev.save(update_fields=["state", "failure_reason", "finished_at", "heartbeat_at"])
            log.warning("evaluation %s failed: %s", ev.pk, ev.failure_reason)
            return Evaluation.State.FAILED
        delay = backoff_for(ev.attempts)
        ev.state = Evaluation.State.QUEUED
        ev.failure_reason = f"{reason}; retry in {delay} s"
        ev.job_id = job_id_for(ev.pk, ev.attempts + 1)
        ev.heartbeat_at = None
        ev.save(update_fields=["state", "failure_reason", "job_id", "heartbeat_at"])
        pk = ev.pk
        transaction.on_commit(lambda: enqueue_evaluation(pk, delay_s=delay))
        log.warning("evaluation %s: %s", pk, ev.failure_reason)
        return Evaluation.State.QUEUED


def release_running_on(worker_name: str, reason: str) -> int:
    """The worker's work horse died (killed, out of memory, job time limit): retry or fail what
    it was running, at once rather than at the next sweep."""
    ids = list(
        Evaluation.objects.filter(state=Evaluation.State.RUNNING, worker_name=worker_name).values_list("pk", flat=True)
    )
    for pk in ids:
        _give_up_attempt(Q(pk=pk, state=Evaluation.State.RUNNING, worker_name=worker_name), reason)
    return len(ids)


# --- the sweep ---------------------------------------------------------------------------------


@dataclass
class SweepReport:
    abandoned: int = 0  # RUNNING rows whose worker stopped beating: retried or failed
    reenqueued: int = 0  # QUEUED rows Redis did not hold: enqueued again
    redis_ok: bool = True

    def __str__(self) -> str:
        redis = "" if self.redis_ok else " (Redis unreachable: nothing re-enqueued)"
        return f"{self.abandoned} abandoned evaluation(s) released, {self.reenqueued} re-enqueued{redis}"


LIVE_JOB_STATUSES = {"queued", "started", "scheduled", "deferred"}


def sweep_evaluations(now: Any = None) -> SweepReport:
    """Make Redis agree with the database. Safe to run concurrently and as often as wanted."""
    close_old_connections()
    now = now or timezone.now()
    report = SweepReport()
    stale = now - timedelta(seconds=stale_after_s())
    overdue = now - timedelta(seconds=settings.EVAL_JOB_TIMEOUT + stale_after_s())
    abandoned = Evaluation.objects.filter(state=Evaluation.State.RUNNING).filter(
        Q(heartbeat_at__lt=stale) | Q(heartbeat_at__isnull=True, started_at__lt=stale) | Q(started_at__lt=overdue)
    )
    for pk, worker_name, heartbeat in abandoned.values_list("pk", "worker_name", "heartbeat_at"):
        seen = f"last heartbeat {heartbeat:%H:%M:%S}" if heartbeat else "no heartbeat"
        condition = Q(pk=pk, state=Evaluation.State.RUNNING, worker_name=worker_name) & (
            Q(heartbeat_at__lt=stale) | Q(heartbeat_at__isnull=True) | Q(started_at__lt=overdue)
        )
        if _give_up_attempt(condition, f"worker stopped responding ({seen}) or passed the job time limit"):
            report.abandoned += 1

    waiting = list(
        Evaluation.objects.filter(
            state=Evaluation.State.QUEUED, queued_at__lt=now - timedelta(seconds=queued_grace_s())
        )
        .values_list("pk", "job_id")
        .order_by("queued_at", "pk")
    )
    if not waiting:
        return report
    try:
        held = _jobs_held_by_redis([job_id for _, job_id in waiting])
    except Exception as exc:
        log.warning("sweep: Redis unreachable (%s)", exc)
        report.redis_ok = False
        return report
    for pk, job_id in waiting:
        if job_id and job_id in held:
            continue
        if not job_id:
            Evaluation.objects.filter(pk=pk, job_id="").update(job_id=job_id_for(pk, 1))
        if enqueue_evaluation(pk):
            report.reenqueued += 1
    return report


def _jobs_held_by_redis(job_ids: list[str]) -> set[str]:
    """The ids among `job_ids` whose job Redis holds in a state that will still run it. A job RQ
    marked 'started' long ago whose evaluation is still queued never got as far as its claim (its
    work horse died first): it is not held."""
    conn = redis_connection()
    started_before = timezone.now() - timedelta(seconds=stale_after_s())
    held: set[str] = set()
    for start in range(0, len(job_ids), 500):
        chunk = [j for j in job_ids[start : start + 500] if j]
        with conn.pipeline(transaction=False) as pipe:
            for job_id in chunk:
                pipe.hmget(f"rq:job:{job_id}", "status", "started_at")
            replies = pipe.execute()
        for job_id, (status, started_at) in zip(chunk, replies, strict=True):
            status = status.decode() if status else ""
            if status not in LIVE_JOB_STATUSES:
                continue
            if status == "started" and started_at and _parse_rq_time(started_at.decode()) < started_before:
                continue
            held.add(job_id)
    return held


def _parse_rq_time(text: str) -> datetime:
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return timezone.now()  # unknown format: count the job as held
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def run_sweeper(interval_s: float, stop: threading.Event, after_each: Callable[[], None] | None = None) -> None:
    """Sweep every `interval_s` seconds until `stop` is set."""
    while not stop.is_set():
        try:
            report = sweep_evaluations()
            if report.abandoned or report.reenqueued:
                log.info("sweep: %s", report)
            if after_each:
                after_each()
        except Exception:
            log.exception("sweep failed; trying again in %s s", interval_s)
            connection.close()
        stop.wait(interval_s)
