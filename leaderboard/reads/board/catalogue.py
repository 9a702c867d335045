"""What a board's choices are chosen from (problem sets with their problem counts, hardware), kept
in the cache rather than read on every board request: three of the five queries a kept level
board's request made, for tables that change only when problems or hardware are imported.

The kept copy is filed under a generation number in the cache, which a write to a problem set, a
problem or a hardware moves when it is made and again after it commits (store.bump_all_versions,
which those writes call): a request that read the tables before the commit files what it read
under a number no later request reads. Without the cache (down) every request reads the tables."""

from __future__ import annotations

import logging
import time
from collections import defaultdict

from django.core.cache import cache
from django.db.models import Count

from problems.models import LEVELS, Hardware, Problem, ProblemSet

log = logging.getLogger(__name__)

GENERATION_KEY = "boards:catalogue-generation"
KEPT_SECONDS = 600  # bounds how long a process whose cache no write reaches keeps an old copy


def problem_sets_with_counts() -> list[ProblemSet]:
    """Every problem set with `.level_counts` ({level: n}) and `.total`."""
    return _kept()[0]


def hardware_list() -> list[Hardware]:
    return _kept()[1]


def forget() -> None:
    """Move the generation: the next request reads the tables again."""
    try:
        cache.set(GENERATION_KEY, _new_generation(), None)
    except Exception as exc:  # the cache away: nothing kept in it either
        log.warning("could not move the boards' catalogue generation: %s", exc)


def _kept() -> tuple[list[ProblemSet], list[Hardware]]:
    try:
        key = f"boards:catalogue:{_generation()}"
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


def _generation() -> int:
    """The current generation; a new one where the cache has none (emptied, or the key evicted), so
    that a copy kept under an older number is never read again."""
    generation = cache.get(GENERATION_KEY)
    if generation is None:
        cache.add(GENERATION_KEY, _new_generation(), None)  # one process's number wins
        generation = cache.get(GENERATION_KEY)
    return generation or 0


def _new_generation() -> int:
    """A number no earlier generation had: the clock, not a count (no read before the write)."""
    return time.time_ns()


def _read() -> tuple[list[ProblemSet], list[Hardware]]:
    sets = list(ProblemSet.objects.all())
    counts: dict[int, dict[int, int]] = defaultdict(lambda: {level: 0 for level in LEVELS})
    for row in Problem.objects.values("problem_set_id", "level").annotate(n=Count("id")).order_by():
        counts[row["problem_set_id"]][row["level"]] = row["n"]
    for problem_set in sets:
        problem_set.level_counts = counts[problem_set.pk]
        problem_set.total = sum(problem_set.level_counts.values())
    return sets, list(Hardware.objects.order_by("slug"))
