"""The problem set the boards open on (overview, levels, the leaderboard API), kept rather than
counted on every request.

The rule (`rank_featured`): the set FEATURED_PROBLEM_SET names (slug or name), else the set with
the most measured or imported runs, so that the demo's set never hides a real one; with no such run
anywhere, the set with the most runs (ties by name). Counting the runs of every set took 1 ms at
1,500 runs and 27-37 ms at 50,000, on every board request. So the choice is kept in the cache
(`keep_featured`): by a write that adds, changes or deletes a run (after its commit), and by the
background re-scorer's sweep (leaderboard/ops/kept_boards.py); a request finds the kept key among
the boards' catalogue of sets (no query of its own), whatever the number of runs. Only a request
that finds nothing kept (the cache emptied, or a site with no re-scorer and a per-process cache)
counts, and keeps what it counted."""

from __future__ import annotations

from django.conf import settings
from django.core.cache import cache
from django.db.models import Count, Q

from leaderboard.models import Origin
from leaderboard.reads.board import catalogue
from problems.models import ProblemSet, named_by

KEY = "boards:featured-set"
NONE = 0  # kept when there is no set at all
# Bounds how long a process whose cache no run write reaches (a per-process cache) shows an old choice.
KEPT_SECONDS = 600


def featured_problem_set(among: list[ProblemSet] | None = None) -> ProblemSet | None:
    """The kept choice (counted and kept when nothing is), found among the problem sets `among`
    (the boards' catalogue when not given: leaderboard/reads/board/catalogue.py) with no query of its
    own; a set that is not among them is read by its key."""
    sets = catalogue.problem_sets_with_counts() if among is None else among
    if settings.FEATURED_PROBLEM_SET:
        named = named_by(sets, settings.FEATURED_PROBLEM_SET, ProblemSet.SLUG_LENGTH)
        if named is None:  # not in the catalogue kept: perhaps created since
            named = ProblemSet.objects.resolve(settings.FEATURED_PROBLEM_SET)
        if named is not None:
            return named
    pk = cache.get(KEY)
    if pk is None:
        return keep_featured()
    if pk == NONE:
        return None
    chosen = next((s for s in sets if s.pk == pk), None) or ProblemSet.objects.filter(pk=pk).first()
    return chosen if chosen is not None else keep_featured()  # a kept set deleted since


def keep_featured() -> ProblemSet | None:
    """Count the runs, keep the choice; the chosen set."""
    chosen = rank_featured()
    cache.set(KEY, chosen.pk if chosen else NONE, KEPT_SECONDS)
    return chosen


def keep_featured_if_missing() -> None:
    """Count and keep the choice when nothing is kept (expired, the cache emptied, or the kept set
    deleted since): the re-scorer's sweep, so that the requests after it find the choice kept."""
    featured_problem_set()


def forget_featured() -> None:
    cache.delete(KEY)


def rank_featured() -> ProblemSet | None:
    """The set with the most measured or imported runs (not the demo's), then the most runs, then by
    name: a count over every run (the reference the kept choice must equal)."""
    real = Count("runs", filter=Q(runs__origin__in=(Origin.MEASURED, Origin.IMPORTED), runs__is_demo=False))
    ranked = ProblemSet.objects.annotate(n_real=real, n_runs=Count("runs"))
    return ranked.order_by("-n_real", "-n_runs", "name").first()
