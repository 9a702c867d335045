"""What every tabular ingestion shares (reported scores, launch posts): reading CSV into numbered
rows, validating every row before anything is written, and reporting all errors at once."""

from __future__ import annotations

import csv
import io
from collections.abc import Callable, Hashable, Sequence
from typing import TypeVar

from leaderboard.ingest.uploads import RowErrors

Row = TypeVar("Row")

__all__ = ["RowErrors", "check_texts", "csv_raws", "read_csv_rows", "validate_rows"]


def check_texts(values: dict[str, str], max_lengths: dict[str, int]) -> None:
    """Every cell must be storable text (no NUL, no lone surrogate) within its column's length;
    ValueError names the first column that is not."""
    for name, text in values.items():
        if "\x00" in text:
            raise ValueError(f"{name} contains a NUL character")
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


def csv_raws(text: str, name: str, required: Sequence[str], columns: Sequence[str] | None = None) -> list[tuple[int, dict]]:
    """The rows of a CSV text with their line numbers; the header must hold `required` (and, when
    `columns` is given, nothing else), and no row may have more cells than the header."""
    reader = csv.DictReader(io.StringIO(text.removeprefix("\ufeff")))
    header = reader.fieldnames or []
    missing = [column for column in required if column not in header]
    if missing:
        raise RowErrors([f"{name}: line 1: header lacks column(s) {', '.join(missing)}"])
    extra = [column for column in header if columns is not None and column not in columns]
    if extra:
        raise RowErrors([f"{name}: line 1: unknown column(s) {', '.join(map(str, extra))}"])
    try:
        raws = [(reader.line_num, raw) for raw in reader]
    except csv.Error as exc:
        raise RowErrors([f"{name}: line {reader.line_num}: {exc}"]) from None
    for line, raw in raws:
        if None in raw:
            raise RowErrors([f"{name}: line {line}: more cells than the header has columns"])
    return raws


def read_csv_rows(
    text: str,
    name: str,
    required: Sequence[str],
    parse_row: Callable[[dict, int], Row],
    key: Callable[[Row], Hashable],
    columns: Sequence[str] | None = None,
    duplicate_hint: str = "",
) -> list[Row]:
    """csv_raws + validate_rows, every error prefixed with the input's name."""
    raws = csv_raws(text, name, required, columns)
    try:
        return validate_rows(raws, parse_row, key, duplicate_hint=duplicate_hint)
    except RowErrors as exc:
        raise RowErrors([f"{name}: {error}" for error in exc.errors]) from None
