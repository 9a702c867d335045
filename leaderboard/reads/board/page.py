"""A level board, from its request to its page or download: the one path a board request takes
through this package (docs/architecture.md, "How a board is assembled").

    parameters (params)  ->  the served build (served)  ->  rows (rows, over store)  ->  columns  ->  page or download

1. `params.level_board_for` reads the visitor's choices; the query string is replaced by its one
   spelling (`params.level_board_query`), the key the build is kept under, and the board is read as
   that spelling has it.
2. `served.cached_board` serves the last complete build of that key, or builds it (`_build`).
3. A build reads the rows (`ranked.board_rows_ranked`: the stored read model, ranked by each row's
   figure: measured here, or published while not yet measured; in the board's own order the
   database ranks the rows and only the shown page's are read, else `rows.board_rows` ranks every
   row in Python), then the columns make the table (`columns.table_rows`), and the result is the
   page, or its CSV or JSON download.
"""

from __future__ import annotations

import functools
from datetime import datetime

from django.conf import settings
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render

from evaluation.results.metrics import fast_p_key
from leaderboard.boards.scoring import RULE_BEST, RULES
from leaderboard.models import Origin, Precision
from leaderboard.reads import charts, repeats
from leaderboard.reads.board import columns as board_columns
from leaderboard.reads.board import grid, params, ranked, rows, served
from problems.models import LEVELS


def level_board(request: HttpRequest, level: str) -> HttpResponse:
    """The level page (or its download, ?export=csv|json) for `level` (one of params.LEVEL_SLUGS)."""
    board = params.level_board_for(level, request)
    return served.cached_board(request, board.filters.problem_set, functools.partial(_build, board))


def _build(board: params.LevelBoard, request: HttpRequest, as_of: datetime) -> HttpResponse:
    """The board's page or download, built for `request` (served builds it for nobody, and again
    off the request path when it goes stale: so it is handed the build, bound to its board)."""
    filters = board.filters
    standings = ranked.board_rows_ranked(board)  # the database ranks it where it can: one page made
    page = Paginator(standings, params.PER_PAGE).get_page(request.GET.get("page"))
    shown = list(page.object_list)
    attach_repeats(shown, filters.level)
    columns = board_columns.columns_for(filters.p)
    table = board_columns.table_rows(shown, columns, first_rank=page.start_index() or 1)
    set_name = filters.problem_set.name if filters.problem_set else ""
    export = request.GET.get("export")
    if export == "csv":
        response = HttpResponse(
            board_columns.to_csv(table, columns, board.label, set_name), content_type="text/csv; charset=utf-8"
        )
        response["Content-Disposition"] = f'attachment; filename="kernelbench-level-{board.level}.csv"'
        return response
    if export == "json":
        body = board_columns.to_json(table, columns, board.label, set_name, filters.p)
        extra = {"include_excluded": filters.include_excluded, "rule": filters.rule, "as_of": as_of.isoformat()}
        return JsonResponse(body | extra)
    context = _context(request, board, as_of) | {
        "columns": columns,
        "table": table,
        "page": page,
        "leaders": standings.leaders(filters.picked_p),
        "any_published": standings.any_published,
        "charts": {"fast_p": charts.fast_p_chart(shown, filters.p)},
    }
    return render(request, "leaderboard/level_board.html", context)


def attach_repeats(shown: list[rows.StandingRow], level: int | None) -> None:
    """Each shown row's kernels measured twice and those that agree (one query for the page's rows,
    not the whole board: the notes column, and so the downloads, read them)."""
    found = repeats.row_repeats([row.run for row in shown], level)
    for row in shown:
        row.repeats = found.get(row.run.pk)


def _context(request: HttpRequest, board: params.LevelBoard, as_of: datetime) -> dict:
    """The page's choices, as its form and links show them."""
    filters = board.filters
    return {
        "level": board.level,
        "level_number": filters.level,
        "level_label": board.label,
        "levels": LEVELS,
        "p": filters.p,
        "p_key": fast_p_key(filters.picked_p),
        "p_text": request.GET.get("p", "") if not board.p_error else "",
        "p_error": board.p_error,
        "problem_sets": board.problem_sets,
        "problem_set": filters.problem_set,
        "hardware_list": board.hardware_list,
        "hardware": filters.hardware,
        "settings": params.run_settings(),
        "setting": filters.setting or "",
        "origins": Origin.choices,
        "origin": filters.origin or "",
        "precisions": Precision.values,
        "precision": filters.precision or "",
        "sort": board.sort_key,
        "descending": board.descending,
        "n_problems": board.n_problems,
        "include_excluded": filters.include_excluded,
        "rule": filters.rule,
        "rule_label": RULES[filters.rule],
        "rule_best": RULE_BEST,
        "as_of": as_of,
        "board_freshness": settings.BOARD_FRESHNESS_SECONDS,
    }


def level_grid(request: HttpRequest, level: int) -> HttpResponse:
    """The level's grid of problems x best kernels (leaderboard.reads.board.grid), for ?set=."""
    board = params.grid_board_for(str(level), request)
    return served.cached_board(request, board.filters.problem_set, functools.partial(_grid, board, level))


def _grid(board: params.LevelBoard, level: int, request: HttpRequest, as_of: datetime) -> HttpResponse:
    cells = grid.level_grid(board.filters.problem_set, level)
    context = {
        "level": str(level),
        "level_number": level,
        "levels": LEVELS,
        "problem_sets": board.problem_sets,
        "problem_set": board.filters.problem_set,
        "grid": cells,
        "repeats": repeats.repeats_of([cell.kernel_id for row in cells for cell in row.cells]),
        "grid_kernels": grid.GRID_KERNELS,
        "grid_places": range(1, grid.GRID_KERNELS + 1),
        "marks": {"disagrees": grid.DISAGREES, "fails": grid.FAILS_HERE},
        "as_of": as_of,
        "board_freshness": settings.BOARD_FRESHNESS_SECONDS,
    }
    return render(request, "leaderboard/level_grid.html", context)
