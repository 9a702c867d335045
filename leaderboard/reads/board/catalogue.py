"""What a board's choices are chosen from (problem sets with their problem counts, hardware), kept
in the cache rather than read on every board request: three of the five queries a kept level
board's request made, for tables that change only when problems or hardware are imported.

The kept copy is filed under the oldest of the boards' versions (their times, read in one small
query of one row per problem set). A write to a problem set, a problem or a hardware moves every
set's version (rescoring.bump_all_versions, which those writes call), so the oldest moves with it,
whichever process wrote and whatever cache it has; a result moves only its own set's version. A
build that reads a new version therefore never reads an older catalogue. Without the cache (down)
every request reads the tables."""

from __future__ import annotations

import logging
from collections import defaultdict

from django.core.cache import cache
from django.db import connection
from django.db.models import Count

from leaderboard.boards.stored import with_tables
from problems.models import LEVELS, Hardware, Problem, ProblemSet

log = logging.getLogger(__name__)

KEPT_SECONDS = 600  # bounds memory: a copy is replaced as soon as the versions move


def problem_sets_with_counts() -> list[ProblemSet]:
    """Every problem set with `.level_counts` ({level: n}) and `.total`."""
    return choices()[0]


def choices() -> tuple[list[ProblemSet], list[Hardware]]:
    """The problem sets (as problem_sets_with_counts gives them) and the hardware by slug, from one
    read of the versions."""
    key = _key()
    try:
        kept = cache.get(key)
    except Exception:  # the cache away: read the tables
        return _read()
    if kept is None:
        kept = _read()
        try:
            cache.set(key, kept, KEPT_SECONDS)
        except Exception as exc:
            log.warning("could not keep the boards' catalogue: %s", exc)
    return kept


def _key() -> str:
    # In SQL: the ORM compiled this one-row aggregate in more time than it took to run.
    with connection.cursor() as cursor:
        cursor.execute(with_tables("SELECT MIN(updated_at), COUNT(*) FROM {version}"))
        oldest, sets = cursor.fetchone()
    # The time as the cursor gives it (a datetime on PostgreSQL, text on SQLite), without its space:
    # a key with one draws Django's warning for memcached on every request.
    oldest = str(oldest).replace(" ", "T") if oldest else "none"
    return f"boards:catalogue:{oldest}:{sets}"


def _read() -> tuple[list[ProblemSet], list[Hardware]]:
    sets = list(ProblemSet.objects.all())
    counts: dict[int, dict[int, int]] = defaultdict(lambda: {level: 0 for level in LEVELS})
    for row in Problem.objects.values("problem_set_id", "level").annotate(n=Count("id")).order_by():
        counts[row["problem_set_id"]][row["level"]] = row["n"]
    for problem_set in sets:
        problem_set.level_counts = counts[problem_set.pk]
        problem_set.total = sum(problem_set.level_counts.values())
    return sets, list(Hardware.objects.order_by("slug"))
