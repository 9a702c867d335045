"""The boards' re-scorer as a test runs it. A write marks the runs it changes; pages and API reads
never re-score them (they serve the stored rows as they are). In a test's own transaction the
writer's after-commit re-scoring never runs, so a test that writes and then reads stored scores
runs the re-scorer in between, as the site's background process (`manage.py refresh_boards`) would."""

from __future__ import annotations

from leaderboard.boards import rescorer
from leaderboard.reads.board.choices import BoardFilters
from leaderboard.reads.board.rows import StandingRow, level_standings
from problems.models import ProblemSet


def run_rescorer() -> int:
    """Pass after pass of the real re-scorer until no mark is left to take (`refresh_boards --once`);
    how many runs it re-scored (or set aside)."""
    total = 0
    while (done := rescorer.rescore_pass()).runs:
        total += done.runs
    return total


def rescored_standings(problem_set: ProblemSet, level: int | None, **filters) -> list[StandingRow]:
    """`level_standings` of these filters once the re-scorer has taken the marks of the writes before it."""
    run_rescorer()
    return level_standings(BoardFilters(problem_set, level, **filters))
