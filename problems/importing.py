"""What every importer shares: idempotent upserts, a report of what changed, progress output."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from django.core.exceptions import ValidationError
from django.core.management.base import CommandError
from django.db import IntegrityError, models, transaction

from problems.models import DB_INT_MAX

T = TypeVar("T")

DIGITS = re.compile(r"[0-9]+")  # ASCII only: "²" and "١" are digits to str.isdigit and \d, not to us
MAX_DIGITS = 18  # longer is out of every column's range, and never reaches int()'s 4300-digit limit

CREATED, UPDATED, UNCHANGED = "created", "updated", "unchanged"


@dataclass
class ImportReport:
    counts: Counter = field(default_factory=Counter)
    warnings: list[str] = field(default_factory=list)

    def add(self, outcome: str) -> None:
        self.counts[outcome] += 1

    @property
    def changed(self) -> int:
        return self.counts[CREATED] + self.counts[UPDATED]

    def summary(self, noun: str) -> str:
        return (
            f"{noun}: {self.counts[CREATED]} created, {self.counts[UPDATED]} updated, "
            f"{self.counts[UNCHANGED]} unchanged"
        )


def whole_number(value: object, high: int = DB_INT_MAX) -> int:
    """A whole number from outside (a file name, a JSON key or value): ASCII digits or an int,
    from 0 to `high`. ValueError says what is wrong, quoting at most a few digits of a huge one."""
    if isinstance(value, str):
        shown = value if len(value) <= 24 else f"{value[:20]}... ({len(value)} characters)"
        if not DIGITS.fullmatch(value):
            raise ValueError(f"{shown!r} is not a whole number (digits 0-9)")
        if len(value) > MAX_DIGITS:
            raise ValueError(f"{shown} is out of range (0-{high})")
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{value!r} is not a whole number")
    if not 0 <= value <= high:
        raise ValueError(f"{value} is out of range (0-{high})")
    return value


def checked_int(value: object, model: type[models.Model], field_name: str) -> int:
    """whole_number, then the validators of the column it is stored in (model-level validation:
    ranges within DB_INT_MAX, minimums)."""
    value = whole_number(value)
    try:
        model._meta.get_field(field_name).run_validators(value)
    except ValidationError as exc:
        raise ValueError(f"{value}: {' '.join(exc.messages)}") from None
    return value


# Tries of find_or_create: each lost race means another request has just made the row.
CREATE_TRIES = 3


def find_or_create(find: Callable[[], T | None], create: Callable[[], T]) -> tuple[T, bool]:
    """`find()`'s row, else `create()`'s, safe against a concurrent request making it first: the
    create runs in a savepoint, and on its unique-constraint error (the other request won) the row
    is found again. Returns (row, created). The IntegrityError goes on when nothing is found after
    CREATE_TRIES tries (then it was not a race)."""
    for attempt in range(1, CREATE_TRIES + 1):
        row = find()
        if row is not None:
            return row, False
        try:
            with transaction.atomic():
                return create(), True
        except IntegrityError:
            if attempt == CREATE_TRIES:
                raise
    raise AssertionError("unreachable")


def upsert(model: type[models.Model], lookup: dict, values: dict) -> tuple[models.Model, str]:
    """Create or update one row so that a second import of the same data changes nothing (a
    concurrent import creating the same row first is found, not an error: find_or_create).

    Returns the row and CREATED, UPDATED or UNCHANGED; a row is saved only when a value differs.
    """
    row, created = find_or_create(
        lambda: model.objects.filter(**lookup).first(), lambda: model.objects.create(**lookup, **values)
    )
    if created:
        return row, CREATED
    changed = [name for name, value in values.items() if getattr(row, name) != value]
    if not changed:
        return row, UNCHANGED
    for name in changed:
        setattr(row, name, values[name])
    row.save()
    return row, UPDATED


def with_progress(items: Iterable[T], total: int, write: Callable[[str], None], label: str) -> Iterator[T]:
    """Yield items, writing `label: i/total` every tenth of the way (and at the end) for long work."""
    step = max(1, total // 10)
    for index, item in enumerate(items, start=1):
        yield item
        if total >= 20 and (index % step == 0 or index == total):
            write(f"  {label}: {index}/{total}")


def read_input_file(path: Path) -> bytes:
    """An import command's input file, as bytes (decoded by the ingest's one upload decoder);
    CommandError naming the file if it can't be read."""
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise CommandError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise CommandError(f"{path}: is a folder, not a file") from None
