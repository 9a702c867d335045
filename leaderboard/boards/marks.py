"""The boards' read model (this package), and what every write calls: per run and level, the stored aggregates every board reads (RunScore),
the kernels' stored review state, and stored kernel counts on runs and problems.

How it stays current:

1. A write that changes a run's inputs calls `mark_problems([(run id, problem id)])` when it
   changes one kernel (its evaluation, a review or report, the kernel added or deleted) and
   `mark_runs(run_ids)` otherwise (run and baseline imports, a kernel edited, a run created),
   directly or through the model signals in leaderboard/boards/signals.py. That upserts a
   DirtyRun row in the writing transaction (once per run and transaction: its oldest mark's time
   stays, its latest is renewed; `whole` once any write asked for the whole run) and, for a problem,
   a DirtyProblem row. Where the site runs the background re-scorer (settings.BOARD_RESCORER) that
   is all a writer does, so a stored result costs its writer a few small queries whatever the size
   of its run; without one, the writer re-scores its runs after its commit.
2. The background re-scorer (leaderboard/boards/rescorer.py, `manage.py refresh_boards`)
   takes the marked runs in batches, oldest first, a few times a second, and re-scores each batch in
   one transaction (`rescore_oldest`), idempotently. A batch is taken as a queue is: the oldest
   marked runs whose rows no other transaction holds, locked with FOR UPDATE SKIP LOCKED in the
   transaction that re-scores them, so a pass never waits for a run another re-scoring holds, nor
   takes it again and again while it is held. A run marked by problem is re-scored incrementally
   (`_fold_problems`): one query reads only the marked problems' kernels with the reference review
   rules (KernelQuerySet.with_review_state) and their stored state; their entries (one per problem:
   scoring.problem_entry) replace the stored ones in their level's rows, whose aggregates move by
   the difference between the old and the new entries (leaderboard/boards/patches.py: the level's
   other entries stay in the database, and a pass's rows are written by one UPDATE), or, where a
   patch cannot apply, those levels are folded again from their stored entries (scoring.fold); the
   all-levels rows follow from the levels' aggregates (scoring.merge: the other levels' entries are
   not read); to the bit what a whole re-scoring stores (tests/django/test_board_incremental.py). A run marked whole, or whose rows
   cannot take a fold, is re-scored from all its kernels. Writes store the kernels' review state
   that changed, the RunScore rows that changed, the runs' and problems' kernel counts and the
   board version. Many results in one run cost one re-scoring; results in many runs share one
   transaction. It removes, last, only the marks no write renewed meanwhile, so writers never wait
   for it and no write is missed.
3. Reads never write. Pages, downloads, the API and board builds read the stored rows as they
   are, whatever marks wait: a read that re-scored would be a write hidden in a read, run by every
   request at once under load, holding run locks readers should not take. Only the re-scorer, or
   the writer after its commit where none runs, re-scores. A board built while marks wait is dated
   as of the oldest of them (`board_state`), so its "as of" stays true, and it is rebuilt once they
   are re-scored (leaderboard/reads/board/served.py). A mark the re-scorer never takes (it is not
   running) shows on /healthz, which reports the boards degraded once the oldest mark waits too
   long.

`rebuild_all` re-scores everything and `verify_all` compares stored rows with a fresh computation
(`manage.py rebuild_boards [--verify]`, which first makes up the pending marks, `make_up_marks`).
"""

from __future__ import annotations

from collections.abc import Iterable

from django.conf import settings
from django.db import transaction
from django.db.models.functions import Now

from leaderboard.boards import marked_here
from leaderboard.boards.rescoring import refresh_runs
from leaderboard.models import (
    DirtyProblem,
    DirtyRun,
)


def mark_runs(run_ids: Iterable[int]) -> None:
    """Record that these runs need re-scoring whole, in the current transaction: the background
    re-scorer takes them once it commits (BOARD_RESCORER), or, on a site without one, this process
    re-scores them after the commit (at once outside a transaction). Cheap to call once per write:
    repeated calls in one transaction mark each run once. A write that changes only some problems
    of a run (a result, a review) calls `mark_problems` instead."""
    ids = {run_id for run_id in run_ids if run_id is not None}
    if not ids:
        return
    connection = transaction.get_connection()
    if not connection.in_atomic_block and not settings.BOARD_RESCORER:
        refresh_runs(ids)
        return
    marked = _marked_ids(connection) if connection.in_atomic_block else set()
    new = ids - marked
    if new:
        # A run already marked keeps its oldest mark's time and takes this write's as its latest
        # (and leaves the set-aside list: re-scored again after a write). Both by the database's
        # clock (Now(), in the statement): marks of every host are compared with each other.
        DirtyRun.objects.bulk_create(
            [DirtyRun(run_id=run_id, marked_at=Now(), last_marked_at=Now(), whole=True) for run_id in sorted(new)],
            update_conflicts=True,
            unique_fields=["run_id"],
            update_fields=["last_marked_at", "failed_at", "error", "whole"],
        )
        marked.update(new)
        marked.update((run_id, None) for run_id in new)


def mark_problems(places: Iterable[tuple[int | None, int]]) -> None:
    """Record that these (run id, problem id) need re-scoring, in the current transaction: the run is
    marked as `mark_runs` marks it, but its re-scoring reads only these problems' kernels and folds
    the run's stored entries again (unless a write in the meantime asked for the whole run)."""
    places = {(run_id, pid) for run_id, pid in places if run_id is not None}
    if not places:
        return
    connection = transaction.get_connection()
    if not connection.in_atomic_block and not settings.BOARD_RESCORER:
        with transaction.atomic():  # the marks are written, then followed after the commit
            mark_problems(places)
        return
    marked = _marked_ids(connection) if connection.in_atomic_block else set()
    new = places - marked
    if not new:
        return
    runs = sorted({run_id for run_id, _ in new if (run_id, None) not in marked})
    # Not `whole`: a run marked whole stays so; a new mark is a partial one (the model's default
    # is whole, for rows written any other way).
    DirtyRun.objects.bulk_create(
        [DirtyRun(run_id=run_id, marked_at=Now(), last_marked_at=Now(), whole=False) for run_id in runs],
        update_conflicts=True,
        unique_fields=["run_id"],
        update_fields=["last_marked_at", "failed_at", "error"],
    )
    DirtyProblem.objects.bulk_create(
        [DirtyProblem(run_id=run_id, problem_id=pid, last_marked_at=Now()) for run_id, pid in sorted(new)],
        update_conflicts=True,
        unique_fields=["run_id", "problem_id"],
        update_fields=["last_marked_at"],
    )
    marked.update(new)
    marked.update((run_id, None) for run_id in runs)


def _marked_ids(connection) -> set:
    """What this transaction marked already: run ids marked whole, (run id, None) for runs whose mark
    is written, (run id, problem id) for problems. A new set per transaction, recognised by the
    after-commit callback registered with it (a rollback discards both). The callback re-scores
    the runs, following their marks, unless a background re-scorer will."""
    current = getattr(marked_here.local, "marked", None)
    if current is not None and any(entry[1] is current[1] for entry in connection.run_on_commit):
        return current[0]
    marked: set = set()

    def after_commit() -> None:
        if getattr(marked_here.local, "marked", None) is state:
            marked_here.local.marked = None
        if not settings.BOARD_RESCORER:
            refresh_runs({place[0] for place in marked if isinstance(place, tuple)}, follow_marks=True)

    state = (marked, after_commit)
    marked_here.local.marked = state
    # robust: a failed re-scoring must not fail the write that committed (the mark stays, for the
    # run's next write, the re-scorer or rebuild_boards to make up).
    transaction.on_commit(after_commit, robust=True)
    return marked
