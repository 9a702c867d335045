"""The query string a board is cached under: only the parameters the board reads, normalised.

Boards are cached per URL (leaderboard.reads.board_cache keys by the request's full path), so a
parameter no board reads (`?junk=1`, `?utm_source=...`), the order of parameters, or a value that
selects the same board (`?p=1.0` and `?p=1`, `?origin=nonsense` and no origin) each made a new cache
entry: 1,500 anonymous requests grew Redis from 2.6 MB to 144 MB (issue 19, case 10). A board view
first replaces the request's query string with its canonical form, so that all of those are one
entry, and the page it renders (whose links keep the query string) carries nothing it did not read.
"""

from __future__ import annotations

from collections.abc import Iterable

from django.http import HttpRequest, QueryDict

from evaluation.metrics import fast_p_key
from leaderboard.reads import queries
from leaderboard.reads.level_board import DEFAULT_PICKED_P, LevelBoard, parse_p
from leaderboard.reads.scoring import RULE_SAMPLE0
from leaderboard.reads.standings import standard_ps
from problems.models import ProblemSet, named_by

MAX_VALUE_LENGTH = 200  # a longer value is cut: no parameter of a board needs more
UNSORTED = "none"  # no column is named so
NO_SUCH_SETTING = "?"  # no run's setting is spelled so: the board shows no run, as for any unknown one


def use_query(request: HttpRequest, query: QueryDict) -> bool:
    """Make `query` the request's query string, for everything after (the cache key, the page's
    links, the API's next/previous URLs). Whether that changed it."""
    text = query.urlencode()
    if text == request.META.get("QUERY_STRING", ""):
        return False
    query._mutable = False
    request.GET = query
    request.META["QUERY_STRING"] = text
    return True


def keep_only(request: HttpRequest, names: Iterable[str]) -> None:
    """For a board whose every parameter is checked where it is read (the API's, which answers 400
    to a value it does not know): the query string cut to the parameters named, in that order."""
    use_query(request, read_only(request, names))


def read_only(request: HttpRequest, names: Iterable[str]) -> QueryDict:
    """The parameters named, in that order, each once (its last value, as QueryDict.get reads it),
    stripped and cut to MAX_VALUE_LENGTH; empty ones left out."""
    query = QueryDict(mutable=True)
    for name in names:
        value = request.GET.get(name, "").strip()[:MAX_VALUE_LENGTH]
        if value:
            query[name] = value
    return query


P_DIGITS = 2  # significant digits a picked p keeps
P_FLOOR = 0.01  # a p under it is 0 (fast_0.001 is fast_0 for every kernel a board can show)


def rounded_p(p: float) -> float:
    """p to P_DIGITS significant digits, 0 under P_FLOOR: boards tell apart about 450 values of p
    between 0 and 1000, so anonymous requests with new p values make a bounded number of cache
    entries (issue 28, case 5: each new p stored another 137 KB)."""
    return 0.0 if p < P_FLOOR else float(f"{p:.{P_DIGITS}g}")


def canonical_p(text: str | None) -> str | None:
    """One spelling per p the level page tells apart (the number rounded by rounded_p), one text per
    kind of error, nothing for the default."""
    p, error = parse_p(text)
    if error:
        return "x" if error.startswith("p must be a number") else "-1"
    p = rounded_p(p)
    return None if p == DEFAULT_PICKED_P else format(p, "g")  # as the page writes p ("2", "1.5")


def keep_rounded_p(request: HttpRequest, p: float | None) -> float | None:
    """For the API's board: p rounded (rounded_p), and the query string's p spelled so (the cache key)."""
    if p is None:
        return None
    p = rounded_p(p)
    query = request.GET.copy()
    query["p"] = format(p, "g")
    use_query(request, query)
    return p


def canonical_sort(sort: str, p: float | None) -> str | None:
    """A column the page sorts by; nothing for the default (the picked p's fast_p); UNSORTED for
    every other text (queries.sort_rows leaves the rows in the standings' order for all of them)."""
    picked = DEFAULT_PICKED_P if p is None else p
    if not sort or sort == fast_p_key(picked):
        return None
    fast_p = [fast_p_key(standard) for standard in standard_ps(picked)]
    return sort if sort in queries.SORT_KEYS or sort in fast_p else UNSORTED


def level_board_query(request: HttpRequest, board: LevelBoard) -> QueryDict:
    """The level page's query string from the choices it read (leaderboard.reads.level_board):
    rows it names by slug, choices that fell back to their default left out, and a text that
    matches nothing (a setting no run has, a sort by no column) spelled one way."""
    raw = read_only(request, ("set", "setting", "sort", "page", "export"))
    named_set = named_by(board.problem_sets, raw.get("set", ""), ProblemSet.SLUG_LENGTH)
    setting = raw.get("setting")
    chosen = {
        "set": named_set.slug if named_set else None,
        "hardware": board.hardware.slug if board.hardware else None,
        "setting": setting if setting is None or setting in queries.run_settings() else NO_SUCH_SETTING,
        "origin": board.origin,
        "precision": board.precision,
        "exclusions": "include" if board.include_excluded else None,
        "rule": None if board.rule == RULE_SAMPLE0 else board.rule,
        "sort": canonical_sort(raw.get("sort", ""), board.p),
        "dir": None if board.descending else "asc",
        "p": canonical_p(request.GET.get("p")),
        "page": raw.get("page") if raw.get("page", "").isdigit() else None,
        "export": raw.get("export") if raw.get("export") in ("csv", "json") else None,
    }
    query = QueryDict(mutable=True)
    for name, value in chosen.items():
        if value:
            query[name] = value
    return query
