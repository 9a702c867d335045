"""What the kept pages (kept_pages.py) are kept under: one small query each, written in SQL since
the ORM's compiling of a query costs more than the query itself on this path (about 1 ms each).

A signature holds every problem set's board version with the time it moved and the marks waiting
for the re-scorer (which every write that changes what a page shows makes), and the page's object's
evaluations: their number, the newest, and how many are still queued or running. None means the
page is not to be kept: an evaluation is pending (the page follows it), nothing was ever scored
(a version that has no time cannot tell a database from the next), or the object does not exist
(the page's own read answers 404)."""

from __future__ import annotations

from collections.abc import Sequence

from django.db import connection

from leaderboard.boards.stored import with_tables

Signature = tuple


# The marks: their number and the latest write that made or renewed one (a write to a run already
# marked moves only its last_marked_at). The table holds only the marks waiting: a few hundred rows
# at 50 stored results a second.
_BOARDS = """
    (SELECT COALESCE(SUM(version), 0) FROM {version}),
    (SELECT MAX(updated_at) FROM {version}),
    (SELECT COUNT(*) FROM {dirty}),
    (SELECT MAX(COALESCE(last_marked_at, marked_at)) FROM {dirty})"""

_PENDING = "SUM(CASE WHEN e.state IN ('queued', 'running') THEN 1 ELSE 0 END)"

_KERNEL = (
    "SELECT"
    + _BOARDS
    + """,
    (SELECT COUNT(*) FROM {kernel} WHERE id = %s),
    COUNT(e.id), MAX(e.id), """
    + _PENDING
    + " FROM {evaluation} e WHERE e.kernel_id = %s"
)

_RUNS = (
    "SELECT"
    + _BOARDS
    + """,
    (SELECT COUNT(*) FROM {run} WHERE id IN ({ids})),
    COUNT(e.id), MAX(e.id), """
    + _PENDING
    + " FROM {evaluation} e JOIN {kernel} k ON k.id = e.kernel_id WHERE k.run_id IN ({ids})"
)

_BOARDS_ONLY = "SELECT" + _BOARDS


def _kept_or_none(row: Sequence, objects: int) -> Signature | None:
    """The signature of a row (the boards' four, the objects found, then the evaluations' three),
    or None when the page is not to be kept."""
    version, updated_at, marks, last_mark, found, *evaluations = row
    if updated_at is None or found != objects or (evaluations and evaluations[2]):
        return None
    return (version, str(updated_at), marks, str(last_mark), *evaluations)


def kernel(pk: int) -> Signature | None:
    """A kernel page's signature."""
    with connection.cursor() as cursor:
        cursor.execute(with_tables(_KERNEL), [pk, pk])
        return _kept_or_none(cursor.fetchone(), 1)


def runs(pks: Sequence[int]) -> Signature | None:
    """A run page's signature (the run's, and the run it is compared with)."""
    ids = ", ".join(str(int(pk)) for pk in pks)
    with connection.cursor() as cursor:
        cursor.execute(with_tables(_RUNS).replace("{ids}", ids))
        return _kept_or_none(cursor.fetchone(), len(set(pks)))


def boards() -> Signature | None:
    """The signature of a page that shows kernels of any set by their stored review state and
    figures (the review queue): every write that moves them marks its run."""
    with connection.cursor() as cursor:
        cursor.execute(with_tables(_BOARDS_ONLY))
        version, updated_at, marks, last_mark = cursor.fetchone()
        return None if updated_at is None else (version, str(updated_at), marks, str(last_mark))
