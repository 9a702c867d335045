"""What every tabular ingestion shares (reported scores, launch posts): reading CSV into numbered
rows, validating every row before anything is written, and reporting all errors at once."""

from __future__ import annotations

import csv
import io
from collections.abc import Callable, Hashable, Sequence
from typing import TypeVar

from leaderboard.ingest.uploads import BOM, RowErrors
from problems.text import control_character_problem, name_problem

Row = TypeVar("Row")
# No column of any table is longer than this (the longest is a 500-character URL): a larger cell
# is refused with its line, and csv's own, larger field limit is never reached.
MAX_CELL_CHARS = 10_000

__all__ = ["RowErrors", "check_texts", "csv_raws", "read_csv_rows", "validate_rows"]


def check_texts(values: dict[str, str], max_lengths: dict[str, int]) -> None:
    """Every cell must be storable one-line text (no NUL or other control character, no lone
    surrogate) within its column's length, and a model's name a name (problems.text.name_problem);
    ValueError names the first column that is not."""
    for name, text in values.items():
        if "\x00" in text:
            raise ValueError(f"{name} contains a NUL character")
        if problem := control_character_problem(text):  # none in one-line cells: names, titles, URLs, dates
            raise ValueError(f"{name} {problem}")
        if name == "model" and text and (problem := name_problem(text)):  # one name, one model
            raise ValueError(f"model {problem}")
        if not text.isascii():
            try:
                text.encode("utf-8")
            except UnicodeEncodeError:
                raise ValueError(f"{name} is not valid Unicode text") from None
        if name in max_lengths and len(text) > max_lengths[name]:
            raise ValueError(f"{name} is longer than {max_lengths[name]} characters")


def validate_rows(
    raws: list[tuple[int, dict]],
    parse_row: Callable[[dict, int], Row],
    key: Callable[[Row], Hashable],
    label: str = "line",
    duplicate_hint: str = "",
) -> list[Row]:
    """Parse every numbered raw row; raise RowErrors naming each bad row and each duplicate key."""
    rows: list[Row] = []
    errors: list[str] = []
    seen: dict[Hashable, int] = {}
    for number, raw in raws:
        try:
            row = parse_row(raw, number)
        except ValueError as exc:
            errors.append(f"{label} {number}: {exc}")
            continue
        if key(row) in seen:
            errors.append(f"{label} {number}: duplicate of {label} {seen[key(row)]}{duplicate_hint}")
            continue
        seen[key(row)] = number
        rows.append(row)
    if errors:
        raise RowErrors(errors)
    return rows


def _shown(name: object) -> str:
    """A column name as an error message quotes it: repr'd, and cut short (a header cell may be huge)."""
    text = repr(name)
    return text if len(text) <= 60 else text[:57] + "..."


def _csv_records(text: str, name: str) -> tuple[list[str], list[tuple[int, list[str]]]]:
    """The header and the numbered records of a CSV text; RowErrors for text csv cannot read,
    and for any cell longer than MAX_CELL_CHARS (the header's included)."""
    reader = csv.reader(io.StringIO(text.removeprefix(BOM)))
    records: list[tuple[int, list[str]]] = []
    try:
        for record in reader:
            if any(len(cell) > MAX_CELL_CHARS for cell in record):
                raise csv.Error(f"field larger than {MAX_CELL_CHARS} characters")
            if record:  # blank lines are skipped, as csv.DictReader does
                records.append((reader.line_num, record))
    except csv.Error as exc:
        if "field larger" in str(exc):
            exc = csv.Error(f"a cell is longer than {MAX_CELL_CHARS} characters")
        raise RowErrors([f"{name}: line {reader.line_num}: {exc}"]) from None
    if not records:
        raise RowErrors([f"{name}: empty: expected a header row and at least one row"])
    (_, header), rows = records[0], records[1:]
    return header, rows


def _check_header(header: list[str], name: str, required: Sequence[str], columns: Sequence[str]) -> None:
    """The header names known columns, each once, and every required one; RowErrors naming the
    columns at fault."""
    problems = []
    missing = [column for column in required if column not in header]
    if missing:
        problems.append(f"header lacks column(s) {', '.join(missing)}")
    unknown = [column for column in header if column not in columns]
    if unknown:
        problems.append(f"unknown column(s) {', '.join(map(_shown, unknown))} (known: {', '.join(columns)})")
    repeated = sorted({column for column in header if header.count(column) > 1 and column in columns})
    if repeated:
        problems.append(f"column(s) {', '.join(repeated)} given twice")
    if problems:
        raise RowErrors([f"{name}: line 1: {problem}" for problem in problems])


def csv_raws(text: str, name: str, required: Sequence[str], columns: Sequence[str]) -> list[tuple[int, dict]]:
    """The one way a CSV table is read: its rows as dicts, numbered by line. The header must name
    only `columns` (unknown ones are refused, not ignored), each once, `required` among them; no
    row may have more cells than the header; no cell may exceed MAX_CELL_CHARS; a table with no
    rows is refused."""
    header, records = _csv_records(text, name)
    _check_header(header, name, required, columns)
    if not records:
        raise RowErrors([f"{name}: no rows below the header"])
    raws = []
    for line, record in records:
        if len(record) > len(header):
            raise RowErrors([f"{name}: line {line}: more cells than the header has columns"])
        raws.append((line, dict(zip(header, record, strict=False))))
    return raws


def read_csv_rows(
    text: str,
    name: str,
    required: Sequence[str],
    parse_row: Callable[[dict, int], Row],
    key: Callable[[Row], Hashable],
    columns: Sequence[str],
    duplicate_hint: str = "",
) -> list[Row]:
    """csv_raws + validate_rows, every error prefixed with the input's name."""
    raws = csv_raws(text, name, required, columns)
    try:
        return validate_rows(raws, parse_row, key, duplicate_hint=duplicate_hint)
    except RowErrors as exc:
        raise RowErrors([f"{name}: {error}" for error in exc.errors]) from None
