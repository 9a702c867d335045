"""Replies for writes refused by a rule of the data rather than by the request's shape: a per-user
quota (429 or 409, leaderboard/evaluations/quotas.py) or an evaluation that may not be asked for
(409, leaderboard/evaluations/queue.py). Each says what was refused and why; nothing was written."""

from __future__ import annotations

from rest_framework import status
from rest_framework.response import Response

from leaderboard.evaluations.queue import EvaluationRefused
from leaderboard.evaluations.quotas import QuotaExceeded

# How long a client over its quota of pending evaluations should wait before asking again.
QUOTA_RETRY_AFTER_S = 60
REFUSALS = (QuotaExceeded, EvaluationRefused)


def refusal(exc: QuotaExceeded | EvaluationRefused) -> Response:
    if isinstance(exc, QuotaExceeded):
        headers = {"Retry-After": str(QUOTA_RETRY_AFTER_S)} if exc.status == 429 else {}
        return Response({"detail": str(exc)}, status=exc.status, headers=headers)
    return Response({"detail": str(exc)}, status=status.HTTP_409_CONFLICT)
