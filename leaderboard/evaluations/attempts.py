"""One attempt at an evaluation: claim it, keep its heartbeat, store its verdict, or give it up.

States (Evaluation.State) and who moves them:

    QUEUED --claim()--> RUNNING --store_result()--> DONE   (a verdict, whatever it is)
                           |
                           +--infrastructure failure / worker died--> QUEUED (retry, with backoff)
                           |        release(), give_up()              or FAILED (attempts used up)

* An attempt is claimed with one conditional UPDATE (state QUEUED -> RUNNING, attempts + 1), so two
  copies of a job (Redis re-delivery, a sweep re-enqueue) never run the same attempt twice.
* While it runs, a thread refreshes `heartbeat_at` every EVAL_HEARTBEAT_S seconds; the sweep
  (leaderboard.evaluations.sweep) gives up attempts whose heartbeat went stale.
* The result is written in one transaction that first re-reads the row under a lock and checks that
  it is still this attempt's: a late result from an attempt the sweep gave up on is dropped, never
  mixed into another attempt's.
* Kernel failures (compile error, wrong answer, timeout, crash of the kernel's process) are results:
  state DONE with that status. Only failures of our side (exception in the worker or the scoring
  library, job time limit, database or Redis trouble, worker killed) give the attempt up: it is
  queued again after EVAL_RETRY_BACKOFF_S x 2^(attempt-1), or failed after EVAL_MAX_ATTEMPTS.
* When a queued evaluation may start is the row's `not_before` (a retry's backoff): a claim refuses
  it earlier, and the sweep enqueues it once due. RQ's scheduler plays no part.
"""

from __future__ import annotations

import logging
import math
import os
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, TypeVar

from django.conf import settings
from django.db import InterfaceError, OperationalError, connection, transaction
from django.db.models import Case, F, IntegerField, Q, Subquery, When
from django.db.models.functions import Least

from evaluation.results.metrics import MAX_SPEEDUP, MIN_RUNTIME_MS, speedup_problem
from leaderboard.evaluations.clock import db_now
from leaderboard.evaluations.queue import enqueue_evaluation, job_id_for
from leaderboard.models import Evaluation, Kernel, Origin

log = logging.getLogger(__name__)

LOG_MAX_CHARS = 100_000


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
    it, it is finished, not due yet (`not_before`), or its attempts are used up."""
    now = db_now()
    fields: dict[str, Any] = dict(
        state=Evaluation.State.RUNNING,
        attempts=F("attempts") + 1,
        worker_name=worker_name[:200],
        started_at=now,
        heartbeat_at=now,
        not_before=None,
    )
    if job_id:
        fields["job_id"] = job_id[:64]
    claimed = (
        Evaluation.objects.filter(pk=evaluation_id, state=Evaluation.State.QUEUED)
        .filter(attempts_left())
        .filter(due(now))
        .update(**fields)
    )
    if not claimed:
        return None
    attempt = Evaluation.objects.values_list("attempts", flat=True).get(pk=evaluation_id)
    return Claim(evaluation_id, attempt, worker_name)


def attempts_left() -> Q:
    """Evaluations that have attempts left: EVAL_MAX_ATTEMPTS, plus those given back."""
    return Q(attempts__lt=F("attempts_returned") + settings.EVAL_MAX_ATTEMPTS)


def give_back_attempts(burned: dict[int, int], reason: str) -> int:
    """A worker host was found broken: give back the attempts it used up (evaluation id -> how many),
    at most EVAL_MAX_ATTEMPTS in an evaluation's life. A `failed` one with attempts left again is
    retried once a healthy host sweeps (sweep.retry_given_back). Returns how many rows changed."""
    changed = 0
    for pk, n in burned.items():
        changed += (
            Evaluation.objects.filter(pk=pk)
            .exclude(state=Evaluation.State.DONE)
            .update(attempts_returned=Least(F("attempts_returned") + n, settings.EVAL_MAX_ATTEMPTS))
        )
    if changed:
        log.warning("gave back the attempts of %s evaluation(s): %s", changed, reason)
    return changed


def due(now: datetime) -> Q:
    """Queued evaluations that may start at `now`: no `not_before`, or one that has passed."""
    return Q(not_before__isnull=True) | Q(not_before__lte=now)


def defer(evaluation_id: int, reason: str, delay_s: float) -> bool:
    """Leave a due QUEUED evaluation unclaimed for `delay_s` seconds (this host cannot run it now),
    without using an attempt; the sweep enqueues it again when due, for any worker. False if it
    was not queued and due."""
    now = db_now()
    deferred = (
        Evaluation.objects.filter(pk=evaluation_id, state=Evaluation.State.QUEUED)
        .filter(due(now))
        .update(not_before=now + timedelta(seconds=delay_s), failure_reason=reason[:2000])
    )
    return bool(deferred)


def _mine(c: Claim) -> Q:
    return Q(pk=c.evaluation_id, state=Evaluation.State.RUNNING, attempts=c.attempt, worker_name=c.worker_name)


class Heartbeat:
    """Refresh `heartbeat_at` of the claimed row every few seconds (by the database's clock), from a
    thread of its own (with its own database connection), until stopped. A beat that fails drops
    its connection, so that the next one opens a fresh one: after a PostgreSQL restart or failover
    the old connection is closed for good, and a thread that kept it beat into it for the rest of
    the attempt while the sweep released the live attempt as dead."""

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
        failed = 0
        try:
            while not self._stop.wait(self.interval_s):
                try:
                    Evaluation.objects.filter(_mine(self.claim)).update(heartbeat_at=db_now())
                except Exception as exc:  # a missed beat is harmless; many in a row mean the sweep retries
                    failed += 1
                    log.warning("heartbeat of evaluation %s failed: %s", self.claim.evaluation_id, exc)
                    connection.close()  # reconnect on the next beat
                    continue
                if failed:
                    log.info(
                        "heartbeat of evaluation %s back after %s missed beat(s)", self.claim.evaluation_id, failed
                    )
                    failed = 0
        finally:
            connection.close()


# --- storing the verdict -----------------------------------------------------------------------


#: Longest wait between two tries of a store while the database is away.
STORE_RETRY_CAP_S = 8.0
T = TypeVar("T")


def with_db_retries(fn: Callable[[], T], budget_s: float | None = None) -> T:
    """Run `fn`, retrying database errors (SQLite 'database is locked', a dropped PostgreSQL
    connection, a database that is down) with backoff (1 s doubling, at most 8 s between tries)
    for `budget_s` (default the evaluation's own budget, EVAL_TIMEOUT_S): a finished verdict is
    too costly to redo over an outage shorter than the evaluation itself. (Tries spanning 15.5 s
    once lost a verdict to a 20 s outage.) `fn` must be safe to run again after a failed try (one
    transaction that checks the row is still this attempt's, as store_result and release do).

    The caller's heartbeat does not keep the attempt alive meanwhile: its beats fail in the same
    outage. Nothing releases the attempt while the database is down either (the sweep needs it
    too); once it is back, an attempt whose last beat is older than EVAL_STALE_AFTER_S may be
    released by a sweep before the next try lands, and that try then finds the row no longer
    this attempt's (the result dropped, the evaluation retried). So a verdict survives an outage
    shorter than both this budget and EVAL_STALE_AFTER_S."""
    deadline = time.monotonic() + (settings.EVAL_TIMEOUT_S if budget_s is None else budget_s)
    attempt = 0
    while True:
        attempt += 1
        try:
            return fn()
        except (OperationalError, InterfaceError):
            wait = min(STORE_RETRY_CAP_S, 0.5 * 2**attempt)
            if time.monotonic() + wait > deadline:
                raise
            log.warning("database error; try %s again in %.0f s", attempt + 1, wait, exc_info=True)
            connection.close()
            time.sleep(wait)


RESULT_FIELDS = (
    "compiled",
    "correct",
    "max_abs_diff",
    "max_rel_diff",
    "trials_passed",
    "trials_total",
)


def store_result(
    c: Claim,
    data: dict[str, Any],
    worker_stages: dict[str, float] | None = None,
    before_save: Callable[[Evaluation], None] | None = None,
) -> bool:
    """Write one attempt's verdict, all or nothing. False (and nothing written) if the row is no
    longer this attempt's (the sweep gave up on it and another attempt owns it).

    Phases: lock the row and check it is this attempt's -> copy the verdict (_apply_verdict) ->
    record where the time went (_stage_seconds) -> mark it DONE -> `before_save` (the instruments
    owed later: follow_up.owe_if_due) -> repoint the kernel's latest evaluation
    (refresh_latest_evaluation)."""
    t0 = time.monotonic()
    with transaction.atomic():
        ev = Evaluation.objects.select_for_update().filter(_mine(c)).first()
        if ev is None:
            log.warning("evaluation %s: attempt %s is no longer current; result dropped", c.evaluation_id, c.attempt)
            return False
        _apply_verdict(ev, data)
        stages = _stage_seconds(ev, data, worker_stages)
        ev.state = Evaluation.State.DONE
        ev.finished_at = db_now()
        ev.heartbeat_at = None
        stages["worker_db_store"] = round(time.monotonic() - t0, 4)
        ev.stage_seconds = stages
        if before_save is not None:
            before_save(ev)
        ev.save()
        refresh_latest_evaluation(ev.kernel_id)
    return True


def _apply_verdict(ev: Evaluation, data: dict[str, Any]) -> None:
    """Copy the scoring library's reply onto the row; a speedup counts only for a correct kernel."""
    status = data.get("status")
    if status not in Evaluation.Status.values:
        raise ValueError(f"the scoring library returned an unknown status {status!r}")
    speedup, interval = data.get("speedup"), data.get("speedup_interval")  # before inf becomes None
    data = finite_json(data)  # no Infinity or NaN reaches a column (PostgreSQL's jsonb refuses them)
    for name in RESULT_FIELDS:
        setattr(ev, name, data.get(name))
    ev.trials_passed = data.get("trials_passed") or 0
    ev.trials_total = data.get("trials_total") or 0
    ev.status = status
    ev.correct = bool(data.get("correct")) and status == Evaluation.Status.CORRECT
    ev.kernel_timing = data.get("kernel_ms") or {}
    # The GPU's device-time speedup and host-bound findings travel with the reference's timing
    # (figures only, exported and imported with it: docs/field.md).
    ev.reference_timing = {
        **(data.get("reference_ms") or {}),
        **({"device": data["device"]} if data.get("device") else {}),
    }
    ev.kernel_ms = ev.kernel_timing.get("median")
    ev.reference_ms = ev.reference_timing.get("median")
    ev.flags = data.get("flags") or []
    ev.notes = data.get("notes") or []
    _apply_speedup(ev, speedup, interval)
    ev.error = (data.get("error") or "")[:LOG_MAX_CHARS]
    ev.log = (data.get("log") or "")[-LOG_MAX_CHARS:]
    ev.environment = data.get("environment") or {}
    ev.instruments = data.get("instruments") or {}


def _apply_speedup(ev: Evaluation, speedup: Any, interval: Any) -> None:
    """The speedup of a correct kernel, within the physical bounds (evaluation.results.metrics): a kernel
    timed under MIN_RUNTIME_MS or faster than MAX_SPEEDUP times the reference (an infinite speedup
    from a zero time) gets no speedup and a flag, so that a reviewer looks (no board shows a made-up
    number)."""
    ev.speedup = ev.speedup_low = ev.speedup_high = None
    if speedup is None or not ev.correct or (isinstance(speedup, (int, float)) and speedup <= 0):
        return
    problem = speedup_problem(speedup) or (
        f"kernel time {ev.kernel_ms!r} ms is under the physical floor of {MIN_RUNTIME_MS:g} ms"
        if isinstance(ev.kernel_ms, (int, float)) and ev.kernel_ms < MIN_RUNTIME_MS
        else None
    )
    if problem:
        ev.flags = [*ev.flags, {"code": "implausible_speedup", "message": f"No speedup stated: {problem}."}]
        return
    ev.speedup = float(speedup)
    bounds = finite_json(list(interval)) if isinstance(interval, (list, tuple)) and len(interval) == 2 else []
    if bounds and None not in bounds:
        ev.speedup_low, ev.speedup_high = (min(float(v), MAX_SPEEDUP) for v in bounds)


def finite_json(value: Any) -> Any:
    """`value` (JSON-like: dicts, lists, numbers, text) with every non-finite float made None."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: finite_json(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite_json(item) for item in value]
    return value


def _stage_seconds(ev: Evaluation, data: dict[str, Any], worker_stages: dict[str, float] | None) -> dict[str, Any]:
    """Where the time went: the library's stages (eval_*), the worker's (worker_*), the queue wait."""
    stages: dict[str, Any] = {f"eval_{k}": v for k, v in (data.get("timings_s") or {}).items()}
    stages.update({f"worker_{k}": round(v, 4) for k, v in (worker_stages or {}).items()})
    if ev.started_at:
        stages["queue_wait"] = round((ev.started_at - ev.queued_at).total_seconds(), 4)
    stages["build_cached"] = bool(data.get("build_cached"))
    return stages


def refresh_latest_evaluation(kernel_id: int) -> None:
    """Point the kernel at the evaluation rankings should use: the newest finished one on its run's
    hardware (any hardware if none there yet), one measured here before any imported claim. Newest
    by request time, so a slow old evaluation finishing late does not hide a newer one.

    Called in the transaction that saved a finished evaluation of the kernel: that save's signal
    marked the kernel's problem for the boards' re-scorer (leaderboard/boards/signals.py), and
    one mark covers the repointing too, since the re-scoring reads the kernel after the commit."""
    run_hardware = (
        Kernel.objects.filter(pk=kernel_id).order_by().values("run__hardware_id")[:1]
    )  # one row: no join to order it
    newest = (
        Evaluation.objects.filter(kernel_id=kernel_id, state=Evaluation.State.DONE)
        .annotate(
            on_run_hardware=Case(
                When(hardware_id=Subquery(run_hardware), then=1), default=0, output_field=IntegerField()
            )
        )
        .annotate(measured=Case(When(origin=Origin.IMPORTED, then=0), default=1, output_field=IntegerField()))
        .order_by("-on_run_hardware", "-measured", "-queued_at", "-pk")
        .values_list("pk", flat=True)
        .first()
    )
    Kernel.objects.filter(pk=kernel_id).update(latest_evaluation_id=newest)


# --- giving an attempt up ----------------------------------------------------------------------


def backoff_for(attempt: int) -> int:
    """Seconds before the retry that follows `attempt`: EVAL_RETRY_BACKOFF_S, doubling each time."""
    return settings.EVAL_RETRY_BACKOFF_S * 2 ** max(0, attempt - 1)


def release(c: Claim, reason: str) -> str:
    """An infrastructure failure ended this attempt: queue a retry after a backoff, or fail the
    evaluation when its attempts are used up. Returns the new state ('' if the row was not ours)."""
    return give_up(_mine(c), reason)


def give_up(condition: Q, reason: str) -> str:
    """End the running attempt of the evaluation matching `condition` (if it still matches, under a
    lock): FAILED when its attempts are used up, else QUEUED again with the retry enqueued after its
    backoff once this commits. Returns the new state, '' when nothing matched."""
    with transaction.atomic():
        ev = Evaluation.objects.select_for_update().filter(condition).first()
        if ev is None:
            return ""
        reason = f"attempt {ev.attempts} on {ev.worker_name or 'unknown worker'}: {reason}"[:2000]
        if ev.attempts - ev.attempts_returned >= settings.EVAL_MAX_ATTEMPTS:
            _fail(ev, f"gave up after {ev.attempts} attempts; last: {reason}")
            return Evaluation.State.FAILED
        _requeue(ev, reason)
        return Evaluation.State.QUEUED


def _fail(ev: Evaluation, reason: str) -> None:
    ev.state = Evaluation.State.FAILED
    ev.failure_reason = reason
    ev.finished_at = db_now()
    ev.heartbeat_at = None
    ev.save(update_fields=["state", "failure_reason", "finished_at", "heartbeat_at"])
    log.warning("evaluation %s failed: %s", ev.pk, ev.failure_reason)


def _requeue(ev: Evaluation, reason: str) -> None:
    """Queue the next attempt after its backoff. The database holds when it may run (`not_before`);
    the sweep enqueues it when due (a sweeper wakes for it), so it runs on time whatever happens to
    Redis or to RQ's scheduler meanwhile. Without a backoff it is enqueued on commit."""
    delay = backoff_for(ev.attempts)
    ev.state = Evaluation.State.QUEUED
    ev.failure_reason = f"{reason}; retry in {delay} s"
    ev.job_id = job_id_for(ev.pk, ev.attempts + 1)
    ev.heartbeat_at = None
    ev.not_before = db_now() + timedelta(seconds=delay) if delay > 0 else None
    ev.save(update_fields=["state", "failure_reason", "job_id", "heartbeat_at", "not_before"])
    pk = ev.pk
    if delay <= 0:
        transaction.on_commit(lambda: enqueue_evaluation(pk))
    log.warning("evaluation %s: %s", pk, ev.failure_reason)


def release_running_on(worker_name: str, reason: str) -> int:
    """The worker's work horse died (killed, out of memory, job time limit): retry or fail what
    it was running, at once rather than at the next sweep."""
    running = Q(state=Evaluation.State.RUNNING, worker_name=worker_name)
    ids = list(Evaluation.objects.filter(running).values_list("pk", flat=True))
    for pk in ids:
        give_up(running & Q(pk=pk), reason)
    return len(ids)


def live_job_ids(job_ids: list[str]) -> set[str]:
    """The ids among `job_ids` whose attempt is running and beating: its heartbeat (or, before the
    first beat, its start) within EVAL_STALE_AFTER_S by the database's clock, the sweep's own rule."""
    if not job_ids:
        return set()
    fresh = db_now() - timedelta(seconds=settings.EVAL_STALE_AFTER_S)
    beating = Q(heartbeat_at__gte=fresh) | Q(heartbeat_at__isnull=True, started_at__gte=fresh)
    rows = Evaluation.objects.filter(job_id__in=job_ids, state=Evaluation.State.RUNNING).filter(beating)
    return set(rows.values_list("job_id", flat=True))
