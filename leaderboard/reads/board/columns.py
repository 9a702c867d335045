"""The board's columns: one definition, shared by the HTML page and the CSV and JSON downloads, so
a download holds exactly what the page shows (published figures and their hardware included)."""

from __future__ import annotations

import csv
import io
import math
import re
from dataclasses import dataclass
from typing import Any

from evaluation.results.metrics import fast_p_key
from leaderboard.reads.board.choices import picked_p
from leaderboard.reads.board.rows import STANDARD_PS, StandingRow
from leaderboard.reads.measured import measured_wording


@dataclass(frozen=True)
class Column:
    key: str  # summary key or a named field; also the sort key and the JSON key
    title: str
    kind: str  # "text", "percent", "points", "speedup", "count" (of the level's problems), "number", "interval"
    sortable: bool = True
    help: str = ""
    picked: bool = False  # the column of the p the visitor chose


def headline_columns(p: float) -> list[Column]:
    """What the board answers first: fast_p at the picked p by the figure each row ranks by
    (measured here; published, labelled with its GPU, while a row is not yet measured here: the
    board's order by default) and its 95% interval with the tie mark; then the published figure,
    a column of its own, and the difference. They follow the model, before every other column, so
    that they stay in view on a laptop screen without scrolling sideways."""
    return [
        Column(
            fast_p_key(p),
            fast_p_key(p),
            "percent",
            help=f"correct and speedup > {p:g} (default 1, KernelBench's fast_1): measured here, or, for a "
            "row not yet measured here, its published figure (labelled so)",
            picked=True,
        ),
        Column(
            "interval",
            "95% interval",
            "interval",
            sortable=False,
            help=f"bootstrap interval over problems of {fast_p_key(p)}; ≈ marks a row tied with the row above",
        ),
        Column(
            "published",
            f"{fast_p_key(p)} published",
            "percent",
            help=f"{fast_p_key(p)} of the figures a published leaderboard gives for the row's kernels, timed on "
            "its GPU (named in the cell); problems it does not list count as failed",
        ),
        Column(
            "difference",
            "Δ measured − published",
            "points",
            help="measured here minus published, in percentage points of the level, over the problems measured "
            "here so far (each problem's measured figure against its own published one)",
        ),
    ]


def columns_for(p: float | None) -> list[Column]:
    p = picked_p(p)
    columns = [
        Column("model", "Model", "text"),
        *headline_columns(p),
        Column("setting", "Setting", "text"),
        Column("precision", "Precision", "text", sortable=False, help="fp32, fp16 or bf16: part of the run's setting"),
        Column("hardware", "Hardware", "text"),
        Column("origin", "Source", "text", sortable=False),
        Column("compiled", "Compiled", "percent", help="share of the level's problems whose kernel compiled"),
        Column(
            "correct",
            "Correct (fast_0)",
            "percent",
            help="share of the level's problems whose sample 0 is correct, with or without a baseline",
        ),
        Column(
            "unscored",
            "Correct, unscored",
            "number",
            help="correct kernels without a speedup (no baseline on this hardware): in fast_0, in no fast_p above 0",
        ),
    ]
    for standard in STANDARD_PS:
        if fast_p_key(standard) != fast_p_key(p):  # the picked p leads the board already
            columns.append(
                Column(
                    fast_p_key(standard), fast_p_key(standard), "percent", help=f"correct and speedup > {standard:g}"
                )
            )
    columns.append(Column("geomean", "Geomean speedup", "speedup", help="geometric mean over correct kernels"))
    columns.append(
        Column(
            "best_fast_1",
            "fast_1 best-of-n",
            "percent",
            help="not KernelBench's rule: the best correct sample of each problem counts (an oracle over samples)",
        )
    )
    columns.append(
        Column("pass_at_1", "pass@1", "percent", help="unbiased pass@1 over every sample (Chen et al., 2021)")
    )
    columns.append(Column("attempted", "Attempted", "count", help="problems with a kernel / problems in the level"))
    columns.append(
        Column(
            "notes",
            "Notes",
            "text",
            sortable=False,
            help="kernels left out by reviews or without a speedup, flags; kernels measured twice here and "
            "how many of them agree",
        )
    )
    return columns


# Columns read from the run itself, and from the row; every other column is a key of its summary.
RUN_FIELDS = {
    "model": lambda run: run.model.name,
    "setting": lambda run: run.setting,
    "precision": lambda run: run.precision,
    "origin": lambda run: run.get_origin_display(),
}
ROW_FIELDS = {
    "compiled": lambda row: row.summary["compiled_rate"],
    "correct": lambda row: row.summary["correct_rate"],
    "geomean": lambda row: row.summary["geomean_speedup"],
    "attempted": lambda row: row.summary["attempted"],
    "unscored": lambda row: row.unscored,
    "interval": lambda row: list(row.interval) if row.interval else None,
    "notes": lambda row: row_notes(row),
    "hardware": lambda row: row.ranked_hardware,  # an L40S for figures timed on one
    "published": lambda row: row.published_fast_p(row.p),
    "difference": lambda row: row.difference(row.p),
}


def raw_value(row: StandingRow, column: Column) -> Any:
    if column.key in RUN_FIELDS:
        return RUN_FIELDS[column.key](row.run)
    if column.key in ROW_FIELDS:
        return ROW_FIELDS[column.key](row)
    if column.key == fast_p_key(row.p):  # the headline: the figure the row ranks by
        return row.rank_value(row.p)
    return row.summary[column.key]


def row_notes(row: StandingRow) -> str:
    """What the numbers leave out or should be read with: excluded kernels (reviews), kernels
    flagged by the scoring library or waiting for review, correct kernels without a speedup."""
    parts = []
    if row.has_published and not row.verified:
        # every column published; the Δ column compares the problems measured here (its help says so)
        measured = measured_wording(row.measured_kernels, row.score.kernels, row.run.hardware.slug)
        parts.append(f"all {row.published_label}; {measured}")
    if row.excluded:
        parts.append(f"{row.excluded} excluded by review")
    if row.flagged:
        parts.append(f"{row.flagged} flagged")
    if row.unreviewed:
        parts.append(f"{row.unreviewed} awaiting review")
    if row.unscored:
        parts.append(f"{row.unscored} correct without a speedup (in fast_0 only)")
    if row.repeats is not None and row.repeats.twice:
        parts.append(row.repeats.wording)
    return "; ".join(parts)


def display_value(row: StandingRow, column: Column) -> str:
    """The text the page shows in the cell (and the CSV holds)."""
    value = raw_value(row, column)
    if column.kind == "percent":
        return "–" if value is None else f"{value * 100:.1f}%"
    if column.kind == "speedup":
        return "–" if value is None or not math.isfinite(value) else f"{value:.2f}x"
    if column.kind == "points":
        return "–" if value is None else f"{value * 100:+.1f} pts"
    if column.kind == "count":
        return f"{value}/{row.summary['n_problems']}"
    if column.kind == "interval":
        return "–" if value is None else f"{value[0] * 100:.0f}–{value[1] * 100:.0f}%" + (" ≈" if row.tied else "")
    return str(value) if value != "" else "–"


def is_demo(row: StandingRow) -> bool:
    return bool(row.run.is_demo or row.run.model.is_demo)


@dataclass(frozen=True)
class TableRow:
    rank: int
    standing: StandingRow
    cells: list[tuple[Column, str]]

    @property
    def demo(self) -> bool:
        return is_demo(self.standing)


def table_rows(rows: list[StandingRow], columns: list[Column], first_rank: int = 1) -> list[TableRow]:
    return [
        TableRow(first_rank + index, row, [(column, display_value(row, column)) for column in columns])
        for index, row in enumerate(rows)
    ]


# A cell a spreadsheet would run as a formula (OWASP "CSV injection"): = + - @, tab or CR first.
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
# A plain number written as text ("-0.5", "1.2x", "45%") stays as it is.
PLAIN_NUMBER = re.compile(r"^-?\d+(\.\d+)?(e-?\d+)?[x%]?$")


def spreadsheet_safe(value: Any) -> Any:
    """A CSV cell that no spreadsheet runs: text that starts like a formula gets a leading ',
    so a model named =HYPERLINK(...) shows as text; numbers are left as they are."""
    if isinstance(value, str) and value.startswith(FORMULA_START) and not PLAIN_NUMBER.match(value):
        return "'" + value
    return value


def csv_titles(column: Column) -> list[str]:
    """The CSV header cells of a column: an interval is two number columns, a count is the count."""
    if column.kind == "interval":
        return [f"{column.title} low", f"{column.title} high"]
    return [column.title]


def csv_cells(row: StandingRow, column: Column) -> list[Any]:
    """The CSV cells of a column, as numbers a spreadsheet can sum (shares as fractions 0-1, like
    the JSON download); an empty cell where the page shows "–"."""
    value = raw_value(row, column)
    if column.kind == "interval":
        return ["", ""] if value is None else list(value)
    if isinstance(value, float) and not math.isfinite(value):
        return [""]
    return ["" if value is None else value]


def to_csv(rows: list[TableRow], columns: list[Column], level_label: str, problem_set: str) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    titles = [title for column in columns for title in csv_titles(column)]
    header = [
        "rank", *titles, "problems", "demo data", "level", "problem set", "run id", "tied", "rule",
        "ranked by", "published on",
    ]  # fmt: skip
    writer.writerow([spreadsheet_safe(title) for title in header])
    for row in rows:
        cells = [
            row.rank,
            *[cell for column in columns for cell in csv_cells(row.standing, column)],
            row.standing.summary["n_problems"],
            "yes" if row.demo else "no",
            level_label,
            problem_set,
            row.standing.run.pk,
            "yes" if row.standing.tied else "no",
            row.standing.rule,
            row.standing.ranked_label,
            row.standing.score.published_on,
        ]
        writer.writerow([spreadsheet_safe(cell) for cell in cells])
    return buffer.getvalue()


def to_json(
    rows: list[TableRow], columns: list[Column], level_label: str, problem_set: str, p: float | None
) -> dict[str, Any]:
    return {
        "level": level_label,
        "problem_set": problem_set,
        "p": p,
        "columns": ["rank", *[column.key for column in columns], "demo", "run_id"],
        "rows": [
            {
                "rank": row.rank,
                **{column.key: raw_value(row.standing, column) for column in columns},
                "demo": row.demo,
                "run_id": row.standing.run.pk,
                "n_problems": row.standing.summary["n_problems"],
                "excluded": row.standing.excluded,
                "flagged": row.standing.flagged,
                "unreviewed": row.standing.unreviewed,
                "unscored": row.standing.unscored,
                "tied": row.standing.tied,
                "rule": row.standing.rule,
                "ranked_by": row.standing.ranked_by,
                "ranked_label": row.standing.ranked_label,
                "published_label": row.standing.published_label if row.standing.has_published else None,
                "measured_kernels": row.standing.measured_kernels,
            }
            for row in rows
        ],
    }
