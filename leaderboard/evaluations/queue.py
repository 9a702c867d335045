"""Asking for evaluations, and the RQ jobs that carry them.

The database is the source of truth for what must be evaluated; Redis only carries the work. An
Evaluation row is created in state QUEUED inside the caller's transaction, and its job is put on
the hardware's queue (`eval-<slug>`) once that transaction commits. If Redis is down at that
moment the submission is still saved: `sweep_evaluations` enqueues it later.

Jobs are module-level functions taking ids (never model instances), so that a job survives being
serialised, retried, or run by another worker on another host.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from functools import lru_cache, partial

import django_rq
from django.conf import settings
from django.db import IntegrityError, transaction
from redis import Redis
from rq import Queue

from leaderboard.evaluations.quotas import check_pending_evaluations
from leaderboard.models import Evaluation, Kernel, Run
from problems.models import Hardware

log = logging.getLogger(__name__)

# Finished jobs stay in Redis this long (seconds) for the django-rq dashboard; the result itself is
# in the database.
RESULT_TTL = 3600
# Jobs name their function by dotted path, so this module need not import the attempt code (which
# imports this module to re-enqueue retries).
JOB_FUNCTION = "leaderboard.evaluations.jobs.run_evaluation_job"


class EvaluationRefused(ValueError):
    """An evaluation that may not be asked for; the message says why (a 4xx for the caller)."""


@dataclass
class Requested:
    queued: list[Evaluation] = field(default_factory=list)  # new evaluations, state QUEUED
    skipped: list[int] = field(default_factory=list)  # kernels that already had one pending there


def request_evaluation(kernel: Kernel, hardware: Hardware, user=None) -> Evaluation:
    """Queue an evaluation of `kernel` on `hardware` (see request_evaluations). Returns the new
    evaluation, or the one already queued or running for that kernel and hardware."""
    requested = request_evaluations([kernel], hardware, user)
    if requested.queued:
        return requested.queued[0]
    return Evaluation.objects.pending().get(kernel=kernel, hardware=hardware)


@transaction.atomic
def request_evaluations(kernels: list[Kernel], hardware: Hardware, user=None) -> Requested:
    """Create a QUEUED Evaluation of each kernel on `hardware`, asked for by `user`, and enqueue
    each job once the surrounding transaction commits. Earlier evaluations are kept (history); a
    new one becomes the kernel's `latest_evaluation` when it finishes.

    Refused whole (EvaluationRefused, nothing written) when a kernel's run is on other hardware;
    QuotaExceeded when the user's queued-or-running evaluations would pass their quota. A kernel
    that already has an evaluation queued or running on `hardware` is skipped: the database holds at
    most one (constraint evaluation_one_pending), and a concurrent request that loses the race on
    the constraint skips it too."""
    _check_hardware(kernels, hardware)
    withheld = [kernel.pk for kernel in kernels if kernel.source_withheld]
    if withheld:
        raise EvaluationRefused(
            f"kernel {withheld[0]} is stored without its source (only its hash and public URL): import its code first"
        )
    busy = set(
        Evaluation.objects.pending()
        .filter(hardware=hardware, kernel__run_id__in={kernel.run_id for kernel in kernels})
        .values_list("kernel_id", flat=True)
    )
    wanted = [kernel for kernel in kernels if kernel.pk not in busy]
    check_pending_evaluations(user, len(wanted))
    requested = Requested(skipped=[kernel.pk for kernel in kernels if kernel.pk in busy])
    requester = user if getattr(user, "is_authenticated", False) else None
    created = _create_all(wanted, hardware, requester)
    if created is None:  # a concurrent request asked for some of them first: one by one, skipping those
        created = []
        for kernel in wanted:
            evaluation = _create_one(kernel, hardware, requester)
            if evaluation is None:
                requested.skipped.append(kernel.pk)
            else:
                created.append(evaluation)
    requested.queued = _enqueue_on_commit(created)
    return requested


def _check_hardware(kernels: list[Kernel], hardware: Hardware) -> None:
    """EvaluationRefused unless every kernel's run is on `hardware`: a run's scores are measured on
    its own hardware, so an evaluation elsewhere would rank on a board it was never measured for."""
    runs = dict(Run.objects.filter(pk__in={kernel.run_id for kernel in kernels}).values_list("pk", "hardware__slug"))
    for run_id, slug in runs.items():
        if slug != hardware.slug:
            raise EvaluationRefused(
                f"run {run_id} is on {slug}: its kernels are evaluated there, not on {hardware.slug}"
            )


def _queued(kernel: Kernel, hardware: Hardware, requester) -> Evaluation:
    return Evaluation(
        kernel=kernel,
        hardware=hardware,
        rules_id=kernel.run.rules_id,  # scored under its run's rules
        state=Evaluation.State.QUEUED,
        requested_by=requester,
    )


def _create_all(kernels: list[Kernel], hardware: Hardware, requester) -> list[Evaluation] | None:
    """The new QUEUED evaluations, in bulk; None (nothing written) when the unique constraint
    refused one: the caller goes on one by one (in a savepoint, so its transaction goes on)."""
    try:
        with transaction.atomic():
            return Evaluation.objects.bulk_create([_queued(k, hardware, requester) for k in kernels], batch_size=500)
    except IntegrityError:
        return None


def _create_one(kernel: Kernel, hardware: Hardware, requester) -> Evaluation | None:
    """The new QUEUED evaluation; None when one is already pending (the unique constraint answered)."""
    evaluation = _queued(kernel, hardware, requester)
    try:
        with transaction.atomic():
            evaluation.save(force_insert=True)
            return evaluation
    except IntegrityError:
        if Evaluation.objects.pending().filter(kernel=kernel, hardware=hardware).exists():
            return None
        raise


def _enqueue_on_commit(evaluations: list[Evaluation]) -> list[Evaluation]:
    """Give each new evaluation its first job id (one bulk update), and enqueue its job once the
    transaction commits."""
    for evaluation in evaluations:
        evaluation.job_id = job_id_for(evaluation.pk, 1)
        transaction.on_commit(partial(enqueue_evaluation, evaluation.pk))
    Evaluation.objects.bulk_update(evaluations, ["job_id"], batch_size=500)
    return evaluations


def job_id_for(evaluation_id: int, attempt: int) -> str:
    """The RQ job id of one attempt: stable, so a re-enqueue after Redis lost it reuses it."""
    return f"evaluation-{evaluation_id}-{attempt}"


#: Seconds any one Redis command of a request (or a sweep) may take: a hung Redis fails it, and the
#: submission is left to the sweep. (Without it a verify blocked 26.7 s on a 30 s hang.)
REDIS_SOCKET_TIMEOUT_S = 5


@lru_cache(maxsize=8)
def _redis(url: str, socket_timeout: float | None = REDIS_SOCKET_TIMEOUT_S) -> Redis:
    return Redis.from_url(
        url, health_check_interval=30, socket_connect_timeout=5, socket_keepalive=True, socket_timeout=socket_timeout
    )


def redis_connection() -> Redis:
    """The Redis that carries evaluation jobs: settings.REDIS_URL (every evaluation queue of RQ_QUEUES
    is built from it; check kb.E003), read at call time and kept open per URL, with a connect
    timeout and a socket timeout on every command, so that an unreachable or hung Redis fails fast
    instead of hanging a request."""
    return _redis(settings.REDIS_URL)


def worker_redis_connection() -> Redis:
    """The same Redis for an RQ worker's own loop, whose dequeue blocks (BLPOP) for minutes by
    design: no socket timeout (RQ's dequeue timeout bounds the wait)."""
    return _redis(settings.REDIS_URL, None)


def eval_queue(name: str) -> Queue:
    """The RQ queue `name` (`eval-<hardware slug>`), configured by RQ_QUEUES through django-rq.

    Enqueued at once (commit_mode "auto"): callers already wait for the commit (request_evaluation
    enqueues from transaction.on_commit), and must see a Redis failure to leave the row to the sweep."""
    return django_rq.get_queue(name, connection=redis_connection(), commit_mode="auto")


def enqueue_evaluation(evaluation_id: int) -> bool:
    """Put the evaluation's job (id in `Evaluation.job_id`) on its hardware's queue now, if it is
    queued. (A retry waits in the database until its `not_before`, and the sweep enqueues it when
    due; a job delivered early finds nothing to claim.) Never raises for Redis trouble: it logs,
    returns False, and the sweep picks the evaluation up later. Returns True when the job is in Redis."""
    evaluation = (
        Evaluation.objects.select_related("hardware")
        .only("job_id", "state", "attempts", "hardware__slug")
        .filter(pk=evaluation_id)
        .first()
    )
    if evaluation is None or evaluation.state != Evaluation.State.QUEUED:
        return False
    queue_name = evaluation.hardware.queue_name
    options = dict(
        args=(evaluation_id,),
        job_id=evaluation.job_id or job_id_for(evaluation_id, 1),
        job_timeout=settings.EVAL_JOB_TIMEOUT,
        result_ttl=RESULT_TTL,
        description=f"evaluation {evaluation_id}",
        # A retry (a released attempt) goes to the front of its queue: it has waited its turn once.
        at_front=evaluation.attempts > 0,
    )
    try:
        eval_queue(queue_name).enqueue(JOB_FUNCTION, **options)
    except Exception as exc:  # Redis down or unreachable: the database still holds the request.
        log.warning("could not enqueue evaluation %s on %s (%s); the sweep will retry", evaluation_id, queue_name, exc)
        return False
    return True
