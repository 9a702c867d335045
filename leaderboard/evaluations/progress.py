"""Where an evaluation stands, for pages and the API: queued (with position), running (since when,
on which worker), done, failed (with the reason).

The database is the source of truth, so positions are counted there: the evaluations of the same
hardware that are QUEUED and were asked for earlier. (Retries go to the back of the queue in Redis
but keep their original request time here, so a retry may show a slightly better position than its
real one; it never shows a worse one.)
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

from django.db.models import Q
from django.utils import timezone

from leaderboard.models import Evaluation


@dataclass(frozen=True)
class Progress:
    state: str  # queued | running | done | failed
    label: str  # one line for people, e.g. "queued, 3rd in line on eval-h200"
    position: int | None = None  # 1 = next to run on its hardware; only while queued
    queue: str = ""
    attempts: int = 0
    worker: str = ""  # the worker running (or that last ran) it, host.pid
    started_at: datetime | None = None  # start of the current (or last) attempt
    finished_at: datetime | None = None
    failure_reason: str = ""  # why it failed, or why the last attempt was retried

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        for key in ("started_at", "finished_at"):
            data[key] = data[key].isoformat() if data[key] else None
        return data


def queue_position(evaluation: Evaluation) -> int | None:
    """1-based place of a queued evaluation among the queued ones of its hardware; None otherwise."""
    if evaluation.state != Evaluation.State.QUEUED:
        return None
    ahead = Evaluation.objects.filter(
        Q(queued_at__lt=evaluation.queued_at) | Q(queued_at=evaluation.queued_at, pk__lt=evaluation.pk),
        state=Evaluation.State.QUEUED,
        hardware_id=evaluation.hardware_id,
    ).count()
    return ahead + 1


def progress(evaluation: Evaluation, position: int | None = None) -> Progress:
    """The lifecycle of one evaluation. Pass `position` when known (see progress_many) to save a query."""
    state = evaluation.state
    queue = evaluation.hardware.queue_name if evaluation.hardware_id else ""
    common = dict(
        state=state,
        queue=queue,
        attempts=evaluation.attempts,
        worker=evaluation.worker_name,
        started_at=evaluation.started_at,
        finished_at=evaluation.finished_at,
        failure_reason=evaluation.failure_reason,
    )
    if state == Evaluation.State.QUEUED:
        position = position if position is not None else queue_position(evaluation)
        retry = f", retry {evaluation.attempts + 1}" if evaluation.attempts else ""
        if evaluation.not_before and evaluation.not_before > timezone.now():
            retry += f" at {timezone.localtime(evaluation.not_before):%H:%M:%S}"
        return Progress(
            label=f"queued, {_ordinal(position or 1)} in line on {queue}{retry}", position=position, **common
        )
    if state == Evaluation.State.RUNNING:
        since = timezone.localtime(evaluation.started_at).strftime("%H:%M:%S") if evaluation.started_at else "?"
        return Progress(label=f"running since {since} on {evaluation.worker_name or 'a worker'}", **common)
    if state == Evaluation.State.FAILED:
        return Progress(label=f"failed: {evaluation.failure_reason or 'no reason recorded'}", **common)
    return Progress(label=f"done: {evaluation.get_status_display()}", **common)


def progress_many(evaluations: Iterable[Evaluation]) -> dict[int, Progress]:
    """Progress of several evaluations (a kernel's history, a run's list), keyed by pk, with one
    query per hardware for the positions instead of one per evaluation."""
    evaluations = list(evaluations)
    positions: dict[int, int] = {}
    queued_hw = {e.hardware_id for e in evaluations if e.state == Evaluation.State.QUEUED}
    for hardware_id in queued_hw:
        order = Evaluation.objects.filter(state=Evaluation.State.QUEUED, hardware_id=hardware_id).order_by(
            "queued_at", "pk"
        )
        wanted = {e.pk for e in evaluations if e.hardware_id == hardware_id and e.state == Evaluation.State.QUEUED}
        for place, pk in enumerate(order.values_list("pk", flat=True).iterator(), start=1):
            if pk in wanted:
                positions[pk] = place
                wanted.discard(pk)
                if not wanted:
                    break
    return {e.pk: progress(e, positions.get(e.pk)) for e in evaluations}


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"
