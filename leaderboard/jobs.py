"""Deprecated alias, kept for one release: jobs queued before the move to leaderboard/evaluations/
name their function `leaderboard.jobs.run_evaluation_job`, and must still run. Remove in the next
release; new code imports leaderboard.evaluations.jobs."""

from leaderboard.evaluations.jobs import run_evaluation_job

__all__ = ["run_evaluation_job"]
