"""Asking for evaluations. (Stub: the worker issue replaces the enqueueing with the real RQ job.)"""

from __future__ import annotations

from django.db import transaction

from leaderboard.models import Evaluation, Kernel
from problems.models import Hardware


def request_evaluation(kernel: Kernel, hardware: Hardware) -> Evaluation:
    """Create a queued Evaluation of `kernel` on `hardware` and enqueue its job once the
    surrounding transaction commits. Returns the evaluation (state QUEUED)."""
    evaluation = Evaluation.objects.create(kernel=kernel, hardware=hardware, state=Evaluation.State.QUEUED)
    transaction.on_commit(lambda: enqueue_evaluation(evaluation.pk))
    return evaluation


def enqueue_evaluation(evaluation_id: int) -> None:
    """Put the evaluation's job on its hardware's queue. Stub until the worker lands."""
