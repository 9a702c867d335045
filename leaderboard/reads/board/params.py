"""A board request's parameters: the visitor's choices read from the query string (`LevelBoard`
around its filters, `BoardFilters`: leaderboard/reads/board/choices.py),
and the one spelling of them the board is cached under.

Boards are cached per URL (leaderboard.reads.board.served keys by the request's full path), so a
parameter no board reads (`?junk=1`, `?utm_source=...`), the order of parameters, or a value that
selects the same board (`?p=1.0` and `?p=1`, `?origin=nonsense` and no origin) each made a new cache
entry: 1,500 anonymous requests grew Redis from 2.6 MB to 144 MB. A board view
first replaces the request's query string with its canonical form, so that all of those are one
entry, and the page it renders (whose links keep the query string) carries nothing it did not read.

Also here: what the choices are chosen from (problem sets with their counts, the featured set:
leaderboard/reads/board/featured.py, hardware, settings), read once per request.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from django.http import HttpRequest, QueryDict

from evaluation.results.metrics import fast_p_key
from leaderboard.boards.scoring import RULE_SAMPLE0, RULES
from leaderboard.models import Origin, Precision, Run
from leaderboard.reads.board import catalogue
from leaderboard.reads.board.choices import DEFAULT_PICKED_P, BoardFilters, LevelBoard, picked_p
from leaderboard.reads.board.featured import featured_problem_set
from leaderboard.reads.board.rows import SORT_KEYS, count_rows, standard_ps
from problems.models import LEVELS, Hardware, ProblemSet, named_by

LEVEL_SLUGS = ("all", *(str(level) for level in LEVELS))  # what /levels/<level>/ accepts
PER_PAGE = 50  # rows on a level page
MAX_P = 1000.0


def parse_p(text: str | None) -> tuple[float | None, str]:
    """The picked p, and what was wrong with the text asked for ('' when nothing was)."""
    if text is None or text.strip() == "":
        return DEFAULT_PICKED_P, ""
    try:
        p = float(text)
    except ValueError:
        return DEFAULT_PICKED_P, f"p must be a number; showing p = {DEFAULT_PICKED_P:g}."
    if not math.isfinite(p) or p < 0 or p > MAX_P:
        return DEFAULT_PICKED_P, f"p must lie between 0 and {MAX_P:g}; showing p = {DEFAULT_PICKED_P:g}."
    return p, ""


@dataclass(frozen=True)
class _Named:
    """What a board's choices are chosen from, and the rows the query names: each looked up once."""

    problem_sets: list[ProblemSet]
    hardware_list: list[Hardware]
    problem_set: ProblemSet | None  # None: the query names no set (or none that exists)
    hardware: Hardware | None


def _named(params: QueryDict) -> _Named:
    problem_sets, hardware_choices = catalogue.choices()
    return _Named(
        problem_sets,
        hardware_choices,
        named_by(problem_sets, params.get("set", ""), ProblemSet.SLUG_LENGTH),
        named_by(hardware_choices, params.get("hardware", ""), Hardware.SLUG_LENGTH),
    )


def read_level_board(level: str, params: QueryDict) -> LevelBoard:
    """The page's choices from its query string; anything unknown falls back to the default (the
    set shown first, any hardware, any origin)."""
    return _read(level, params, _named(params))


def level_board_for(level: str, request: HttpRequest) -> LevelBoard:
    """The level page's board as the one spelling of its query string has it; that spelling becomes
    the request's (`level_board_query`, `use_query`): the cache key and the page's links."""
    named = _named(request.GET)
    board = _read(level, request.GET, named)
    if use_query(request, level_board_query(request, board)):
        board = _read(level, request.GET, named)  # as the cache key has it; it names the same rows
    return board


def grid_board_for(level: str, request: HttpRequest) -> LevelBoard:
    """The grid's board; its query string becomes the set's slug alone (`grid_query`)."""
    board = read_level_board(level, request.GET)
    use_query(request, grid_query(board))
    return board


def _read(level: str, params: QueryDict, named: _Named) -> LevelBoard:
    p, p_error = parse_p(params.get("p"))
    problem_set = named.problem_set
    if problem_set is None:
        featured = featured_problem_set(among=named.problem_sets)
        problem_set = next((s for s in named.problem_sets if featured and s.pk == featured.pk), None)
    filters = BoardFilters(
        problem_set=problem_set,
        level=None if level == "all" else int(level),
        p=p,
        hardware=named.hardware,
        setting=params.get("setting") or None,
        origin=params.get("origin") if params.get("origin") in Origin.values else None,
        precision=params.get("precision") if params.get("precision") in Precision.values else None,
        include_excluded=params.get("exclusions") == "include",
        rule=params.get("rule") if params.get("rule") in RULES else RULE_SAMPLE0,
    )
    return LevelBoard(
        filters=filters,
        p_error=p_error,
        problem_sets=named.problem_sets,
        hardware_list=named.hardware_list,
        sort=params.get("sort") or "",
        descending=params.get("dir", "desc") != "asc",
        set_named=named.problem_set is not None,
    )


# ---------------------------------------------------------------------------------------------
# what the choices are chosen from


def run_settings() -> list[str]:
    return list(Run.objects.order_by("setting").values_list("setting", flat=True).distinct())


# ---------------------------------------------------------------------------------------------
# the canonical query string


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
    entries (each new p stored another 137 KB, and a full cache evicts what it must keep)."""
    return 0.0 if p < P_FLOOR else float(f"{p:.{P_DIGITS}g}")


def canonical_p(text: str | None) -> str | None:
    """One spelling per p the level page tells apart (the number rounded by rounded_p), one text per
    kind of error, nothing for the default."""
    p, error = parse_p(text)
    if error:
        return "x" if error.startswith("p must be a number") else "-1"
    p = rounded_p(p)
    return None if p == DEFAULT_PICKED_P else format(p, "g")  # as the page writes p ("2", "1.5")


def canonical_sort(sort: str, p: float | None) -> str | None:
    """A column the page sorts by; nothing for the default (the picked p's fast_p); UNSORTED for
    every other text (rows.sort_rows leaves the rows in the standings' order for all of them)."""
    picked = picked_p(p)
    if not sort or sort == fast_p_key(picked):
        return None
    fast_p = [fast_p_key(standard) for standard in standard_ps(picked)]
    return sort if sort in SORT_KEYS or sort in fast_p else UNSORTED


def canonical_page(text: str | None, per_page: int, filters: BoardFilters) -> str | None:
    """A page number the board of `filters` has (one past its last is its last), spelled as an
    integer; nothing for the first page or a text that is no whole number. The board's rows are
    counted (one query) only for a page past the first. So `?page=01`, `?page=99999` and a new
    number each time make no new cache entry: a stream of new keys would take the one rebuild slot
    from the boards people read."""
    try:
        page = int((text or "").strip())
    except ValueError:
        return None
    if page <= 1:
        return None
    page = min(page, max(1, math.ceil(count_rows(filters) / per_page)))
    return None if page == 1 else str(page)


def level_board_query(request: HttpRequest, board: LevelBoard) -> QueryDict:
    """The level page's query string from the choices it read (leaderboard.reads.board.params):
    rows it names by slug, choices that fell back to their default left out, and a text that
    matches nothing (a setting no run has, a sort by no column) spelled one way."""
    raw = read_only(request, ("setting", "sort", "page", "export"))
    setting = raw.get("setting")
    filters = board.filters
    chosen = {
        "set": filters.problem_set.slug if board.set_named and filters.problem_set else None,
        "hardware": filters.hardware.slug if filters.hardware else None,
        "setting": setting if setting is None or setting in run_settings() else NO_SUCH_SETTING,
        "origin": filters.origin,
        "precision": filters.precision,
        "exclusions": "include" if filters.include_excluded else None,
        "rule": None if filters.rule == RULE_SAMPLE0 else filters.rule,
        "sort": canonical_sort(raw.get("sort", ""), filters.p),
        "dir": None if board.descending else "asc",
        "p": canonical_p(request.GET.get("p")),
        "page": canonical_page(raw.get("page"), PER_PAGE, filters),
        "export": raw.get("export") if raw.get("export") in ("csv", "json") else None,
    }
    query = QueryDict(mutable=True)
    for name, value in chosen.items():
        if value:
            query[name] = value
    return query


def grid_query(board: LevelBoard) -> QueryDict:
    """The grid's query string: the set it shows, by slug, when the request named one; nothing
    otherwise (an unknown name shows the default set, as no name does)."""
    query = QueryDict(mutable=True)
    if board.set_named and board.filters.problem_set is not None:
        query["set"] = board.filters.problem_set.slug
    return query
