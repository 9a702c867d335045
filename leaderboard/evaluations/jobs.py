"""The RQ job function. Jobs are module-level functions taking ids (never model instances), so that
a job survives being serialised, retried, or run by another worker on another host."""

from __future__ import annotations

from leaderboard.evaluations.worker import run_evaluation


def run_evaluation_job(evaluation_id: int) -> str:
    """The RQ job: claim the evaluation, run it, store its result. Returns what happened."""
    return run_evaluation(evaluation_id)
