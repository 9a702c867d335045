"""The boards' read model: per run and level, the stored aggregates every board reads (RunScore),
the kernels' stored review state, and stored kernel counts on runs and problems.

How it stays current:

1. A write that changes a run's inputs calls `mark_problems([(run id, problem id)])` when it
   changes one kernel (its evaluation, a review or report, the kernel added or deleted) and
   `mark_runs(run_ids)` otherwise (run and baseline imports, a kernel edited, a run created),
   directly or through the model signals in leaderboard/reads/board/signals.py. That upserts a
   DirtyRun row in the writing transaction (once per run and transaction: its oldest mark's time
   stays, its latest is renewed; `whole` once any write asked for the whole run) and, for a problem,
   a DirtyProblem row. Where the site runs the background re-scorer (settings.BOARD_RESCORER) that
   is all a writer does, so a stored result costs its writer a few small queries whatever the size
   of its run; without one, the writer re-scores its runs after its commit.
2. The background re-scorer (leaderboard/reads/board/rescorer.py, `manage.py refresh_boards`)
   takes the marked runs in batches, oldest first, a few times a second, and re-scores each batch in
   one transaction (`rescore_oldest`), idempotently. A batch is taken as a queue is: the oldest
   marked runs whose rows no other transaction holds, locked with FOR UPDATE SKIP LOCKED in the
   transaction that re-scores them, so a pass never waits for a run another re-scoring holds, nor
   takes it again and again while it is held. A run marked by problem is re-scored incrementally
   (`_fold_problems`): one query reads only the marked problems' kernels with the reference review
   rules (KernelQuerySet.with_review_state) and their stored state; their entries (one per problem:
   scoring.problem_entry) replace the stored ones in their level's rows, and those levels and the
   all-levels rows are folded again from the stored entries (scoring.fold), to the bit what a whole
   re-scoring stores (tests/django/test_board_incremental.py). A run marked whole, or whose rows
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

import logging
import threading
from array import array
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.db import DatabaseError, OperationalError, transaction
from django.db.models import DateTimeField, Exists, F, OuterRef, Q, Subquery, Value
from django.db.models.functions import Least, Now
from django.utils import timezone

from evaluation.metrics import speedup_problem
from leaderboard.evaluations.clock import db_now
from leaderboard.models import (
    BoardVersion,
    DirtyProblem,
    DirtyRun,
    Kernel,
    KernelQuerySet,
    LanguageModel,
    Origin,
    ProblemStats,
    Run,
    RunScore,
)
from leaderboard.reads.board import scoring
from leaderboard.reads.board.scoring import KernelFacts, LevelScore, Tally
from problems.models import Hardware, Problem, ProblemSet, ScoringRules

log = logging.getLogger(__name__)

ALL_LEVELS = 0  # RunScore.level of the all-levels row
BATCH = 200  # runs re-scored per transaction by rebuild_all

_FACT_FIELDS = (
    "pk",
    "run_id",
    "problem__level",
    "problem_id",
    "sample_index",
    "latest_evaluation__compiled",
    "latest_evaluation__correct",
    "latest_evaluation__speedup",
    "is_flagged",
    "needs_review",
    "is_excluded",
    "latest_verdict",
    "latest_report_at",
    "evaluated_at",
    "created_at",
    "latest_evaluation__origin",
    "published_speedup",
    "published_hardware",
)
_STATE_FIELDS = (
    "review_verdict",
    "review_pending",
    "review_excluded",
    "review_flagged",
    "review_queued_at",
    "latest_speedup",
    "ranked_speedup",
)


@dataclass(frozen=True)
class KernelRow:
    pk: int
    run_id: int
    level: int
    facts: KernelFacts
    state: tuple  # the review state the rules give now (as _STATE_FIELDS)
    stored: tuple | None = None  # the review state stored on the kernel, when asked for


def kernel_rows(kernels: KernelQuerySet, with_stored: bool = False) -> list[KernelRow]:
    """Each kernel's scoring facts and review state by the reference rules (and the state stored,
    `with_stored`), in one query."""
    fields = (*_FACT_FIELDS, *_STATE_FIELDS) if with_stored else _FACT_FIELDS
    result = []
    for values in kernels.order_by().with_review_state().values_list(*fields):
        pk, run_id, level, problem_id, sample, compiled, correct, speedup, *review = values[: len(_FACT_FIELDS)]
        flagged, pending, excluded, verdict, reported_at, evaluated_at, created_at, origin, published, on = review
        facts = KernelFacts(
            problem_id, sample, compiled, correct, speedup, bool(flagged), bool(pending), bool(excluded),
            origin == Origin.MEASURED, published, on,
        )  # fmt: skip
        queued_at = (reported_at or evaluated_at or created_at) if pending else None
        ranked = ranked_speedup(origin, speedup, published)
        state = (verdict or "", bool(pending), bool(excluded), bool(flagged), queued_at, speedup, ranked)
        stored = tuple(values[len(_FACT_FIELDS) :]) if with_stored else None
        result.append(KernelRow(pk, run_id, level, facts, state, stored))
    return result


def ranked_speedup(origin: str | None, speedup: float | None, published: float | None) -> float | None:
    """The speedup a kernel ranks by on the problem page and the grid: measured here when it was
    (None when it failed here: a published figure does not outrank a failure here), else its
    latest evaluation's, else the published figure."""
    if origin == Origin.MEASURED or speedup is not None:
        return speedup
    return published


# ---------------------------------------------------------------------------------------------
# scheduling: mark in the transaction; re-score in the background (or after commit)

_local = threading.local()


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
    current = getattr(_local, "marked", None)
    if current is not None and any(entry[1] is current[1] for entry in connection.run_on_commit):
        return current[0]
    marked: set = set()

    def after_commit() -> None:
        if getattr(_local, "marked", None) is state:
            _local.marked = None
        if not settings.BOARD_RESCORER:
            refresh_runs({place[0] for place in marked if isinstance(place, tuple)}, follow_marks=True)

    state = (marked, after_commit)
    _local.marked = state
    # robust: a failed re-scoring must not fail the write that committed (the mark stays, for the
    # run's next write, the re-scorer or rebuild_boards to make up).
    transaction.on_commit(after_commit, robust=True)
    return marked


def _forget_marked(run_ids: list[int]) -> None:
    """These runs were re-scored in the current transaction: a later write in it marks them again."""
    marked = getattr(_local, "marked", None)
    if marked is None:
        return
    ids = set(run_ids)
    stale = {place for place in marked[0] if (place[0] if isinstance(place, tuple) else place) in ids}
    marked[0].difference_update(stale)


def rescore_oldest(limit: int) -> int:
    """The re-scorer's batch: the `limit` runs marked longest ago that no other transaction holds,
    locked and re-scored in one transaction (runs another re-scoring holds are left to it: a pass
    moves on to the next marked runs instead of taking the same held ones again). How many runs it
    re-scored (or set aside). A pass that finds less than a full batch also removes the marks of
    runs deleted since they were marked."""
    done = _rescore_marked(limit)
    if done < limit:
        _drop_orphan_marks()
    return done


def _rescore_marked(limit: int) -> int:
    runs: dict[int, int] = {}
    try:
        with transaction.atomic():
            runs = _take_marked(limit)
            if runs:
                _rescore(sorted(runs), runs, follow_marks=True)
    except OperationalError:
        raise  # the database is unwell (down, a deadlock): not the runs' fault, retried by the caller
    except (DatabaseError, ValueError, TypeError, ArithmeticError):
        for run_id in sorted(runs):  # one bad run among them: run by run, a failing one set aside
            refresh_runs([run_id], skip_busy=True)
    return len(runs)


def _take_marked(limit: int) -> dict[int, int]:
    """{run id: problem set id} of the `limit` runs marked longest ago whose rows no other
    transaction holds, locked in the current transaction: the queue pattern, FOR UPDATE SKIP LOCKED
    over the runs joined to their marks, in mark order (on SQLite, which locks the whole database,
    without the locking clause)."""
    marks = _dirty()
    runs = Run.objects.filter(pk__in=marks.values("run_id"))
    oldest = runs.annotate(mark=Subquery(marks.filter(run_id=OuterRef("pk")).values("marked_at")[:1]))
    taken = oldest.select_for_update(skip_locked=True, of=("self",)).order_by("mark", "pk")[:limit]
    return dict(taken.values_list("pk", "problem_set_id"))


def _drop_orphan_marks() -> None:
    """Remove the marks of deleted runs (a run's deletion marks it through its kernels'), skipping
    those a writer holds."""
    with transaction.atomic():
        orphans = DirtyRun.objects.select_for_update(skip_locked=True).filter(
            ~Exists(Run.objects.filter(pk=OuterRef("run_id")))
        )
        ids = list(orphans.values_list("run_id", flat=True))
        if ids:
            DirtyRun.objects.filter(run_id__in=ids).delete()
        gone = DirtyProblem.objects.select_for_update(skip_locked=True).filter(
            ~Exists(Run.objects.filter(pk=OuterRef("run_id")))
        )
        places = list(gone.values_list("pk", flat=True))
        if places:
            DirtyProblem.objects.filter(pk__in=places).delete()


def make_up_marks() -> int:
    """Re-score every run marked now (not set aside), in batches, waiting for the runs another
    re-scoring holds: what a check of the stored boards does first, so that it compares settled
    state. How many runs were marked."""
    ids = list(_dirty().order_by("run_id").values_list("run_id", flat=True))
    for start in range(0, len(ids), BATCH):
        refresh_runs(ids[start : start + BATCH], follow_marks=True)
    return len(ids)


def _dirty():
    return DirtyRun.objects.filter(failed_at__isnull=True)  # set-aside runs wait for a write or a rebuild


def refresh_kernel_states(kernel_ids: Iterable[int]) -> None:
    """Store the review state of these kernels now (in the current transaction): the queue reads it."""
    _store_kernel_states(kernel_rows(Kernel.objects.filter(pk__in=list(kernel_ids)), with_stored=True))


# ---------------------------------------------------------------------------------------------
# re-scoring runs


def refresh_runs(run_ids: Iterable[int], *, skip_busy: bool = False, follow_marks: bool = False) -> None:
    """Re-score runs, idempotently, in one transaction: their kernels' review state, RunScore rows,
    kernel counts and the board version of their problem sets. Whole, or, `follow_marks`, as their
    marks say (only the marked problems of a run marked by problem). A batch that fails is
    re-scored run by run, whole, and a run that fails alone is set aside (set_aside): one bad run
    never takes the boards down (an infinite speedup once did, until an admin deleted the run).
    `skip_busy` (work taken from the marks): leave the runs another re-scoring holds to it instead
    of waiting, their marks to the next pass if it read too early."""
    ids = sorted(set(run_ids))
    if not ids:
        return
    try:
        _refresh(ids, skip_busy, follow_marks)
    except OperationalError:
        raise  # the database is unwell (down, a deadlock): not the runs' fault, and retried as before
    except (DatabaseError, ValueError, TypeError, ArithmeticError) as exc:
        if len(ids) > 1:
            for run_id in ids:
                refresh_runs([run_id], skip_busy=skip_busy)
        else:
            set_aside(ids[0], exc)


def set_aside(run_id: int, exc: Exception) -> None:
    """Keep a run that fails to score off the refresh path: its DirtyRun row says when and why
    (admin; /healthz "degraded"; the kb_runs_set_aside metric), and its stored scores stay."""
    log.error("run %s fails to score and is set aside: %s", run_id, exc, exc_info=True)
    DirtyRun.objects.update_or_create(
        run_id=run_id, defaults={"failed_at": db_now(), "error": f"{type(exc).__name__}: {exc}"[:2000]}
    )


def oldest_mark_seconds() -> float:
    """How long the oldest mark still to be re-scored has waited (0 when none waits)."""
    oldest = _dirty().order_by("marked_at").values_list("marked_at", flat=True).first()
    return (db_now() - oldest).total_seconds() if oldest else 0.0


def set_aside_runs() -> list[DirtyRun]:
    return list(DirtyRun.objects.filter(failed_at__isnull=False).order_by("failed_at"))


def _refresh(ids: list[int], skip_busy: bool = False, follow_marks: bool = False) -> None:
    with transaction.atomic():
        # Lock the runs: concurrent refreshes of one run (two workers, a reader) take turns, or, with
        # skip_busy, leave it to the one holding it (the re-scorer and a board build never queue up).
        runs = dict(
            Run.objects.select_for_update(skip_locked=skip_busy)
            .filter(pk__in=ids)
            .order_by("pk")
            .values_list("pk", "problem_set_id")
        )
        if skip_busy and len(runs) < len(ids):  # some are busy, or deleted (whose marks go with these)
            busy = set(Run.objects.filter(pk__in=ids).exclude(pk__in=list(runs)).values_list("pk", flat=True))
            ids = [run_id for run_id in ids if run_id not in busy]
        _rescore(ids, runs, follow_marks)


def _rescore(ids: list[int], runs: dict[int, int], follow_marks: bool = False) -> None:
    """Re-score `runs` ({run id: problem set id}, locked by the caller's transaction) and remove the
    marks of `ids` (those runs, and deleted ones) that no write renewed meanwhile. Whole, or,
    `follow_marks`, only the marked problems of the runs marked by problem (`_fold_problems`)."""
    _forget_marked(ids)
    read_at = db_now()
    marks = list(DirtyRun.objects.filter(run_id__in=ids).values_list("run_id", "last_marked_at", "whole"))
    places = list(DirtyProblem.objects.filter(run_id__in=ids).values_list("run_id", "problem_id", "last_marked_at"))
    # after the marks: a write that lands meanwhile renews its mark, which then stays
    partial = _partial_runs(runs, marks, places) if follow_marks else {}
    whole = {run_id: pset for run_id, pset in runs.items() if run_id not in partial}
    if whole:
        rows = kernel_rows(Kernel.objects.filter(run_id__in=list(whole)), with_stored=True)
        _store_kernel_states(rows)
        stored = list(RunScore.objects.filter(run_id__in=list(whole)))
        fresh = _scores(rows, whole)
        _store_scores(fresh, stored)
        counted = _counts_by_run(fresh)
        _move_counts(_counts_by_run(stored), {run_id: counted[run_id] for run_id in whole}, exact=True)
    if partial:
        not_folded = _fold_problems(partial)
        if not_folded:  # no stored entries to fold into (never scored, or stored in an older form)
            _rescore(sorted(not_folded), {run_id: runs[run_id] for run_id in not_folded})
    bump_versions(set(runs.values()))
    _clear_marks([(run_id, last) for run_id, last, _ in marks], read_at)  # last: writers wait for nothing
    _clear_problem_marks(places)


def _partial_runs(runs: dict[int, int], marks: list[tuple], places: list[tuple]) -> dict[int, set[int]]:
    """{run id: its marked problems} of the runs whose mark asks only for some problems."""
    by_problem = {run_id for run_id, _, whole in marks if not whole}
    partial: dict[int, set[int]] = defaultdict(set)
    for run_id, pid, _ in places:
        if run_id in by_problem and run_id in runs:
            partial[run_id].add(pid)
    return partial


def _fold_problems(partial: dict[int, set[int]]) -> set[int]:
    """Re-score the marked problems of runs ({run id: problem ids}): read only their kernels, store
    their review state, replace their entries in the run's stored rows of their levels, and fold
    those levels and all levels again (scoring.fold), exactly as a whole re-scoring would store them.
    The runs it cannot fold (a stored row missing or in an older form, a problem deleted since) are
    returned, untouched."""
    levels = dict(Problem.objects.filter(pk__in={p for ps in partial.values() for p in ps}).values_list("pk", "level"))
    stored_by_run: dict[int, list[RunScore]] = defaultdict(list)
    for row in RunScore.objects.filter(run_id__in=list(partial)):
        stored_by_run[row.run_id].append(row)
    foldable = {
        run_id for run_id, pids in partial.items() if pids <= levels.keys() and _foldable(stored_by_run[run_id])
    }
    places = Q()
    for run_id in foldable:
        places |= Q(run_id=run_id, problem_id__in=partial[run_id])
    rows = kernel_rows(Kernel.objects.filter(places), with_stored=True) if foldable else []
    _check_speedups(rows)
    _store_kernel_states(rows)
    entries = _entries(rows)
    fresh, stored, old, new = [], [], {}, {}
    for run_id in foldable:
        changed = {pid: entries.get((run_id, pid)) for pid in partial[run_id]}
        refolded = _refolded(run_id, stored_by_run[run_id], changed, levels)
        fresh += refolded
        touched = {row.level for row in refolded} | {levels[pid] for pid in changed}
        stored += [row for row in stored_by_run[run_id] if row.level in touched]
        counted = _counts_by_run(stored_by_run[run_id])[run_id]
        old[run_id] = Counter({pid: n for pid, n in counted.items() if pid in changed})
        new[run_id] = Counter({pid: pair[0][scoring.KERNELS] for pid, pair in changed.items() if pair is not None})
    _store_scores(fresh, stored)
    _move_counts(old, new, exact=False)  # old and new of the changed problems only
    return set(partial) - foldable


def _foldable(stored: list[RunScore]) -> bool:
    """Whether a run's stored rows can take a fold: both all-levels rows there (and without
    entries), each level's two rows there, every entry whole (not an older form)."""
    keys = {(row.level, row.with_excluded) for row in stored}
    return (
        all((level, not we) in keys for level, we in keys)
        and (ALL_LEVELS, False) in keys
        and all(not row.problems for row in stored if row.level == ALL_LEVELS)
        and all(len(entry) == scoring.ENTRY_LENGTH for row in stored for entry in row.problems.values())
    )


def _refolded(
    run_id: int, stored: list[RunScore], changed: dict[int, tuple | None], levels: dict[int, int]
) -> list[RunScore]:
    """The run's rows of the changed problems' levels and of all levels, with those problems'
    entries replaced by `changed` ({problem id: (entry, entry counting excluded kernels), or None:
    no kernel left}), folded again. Entries are stored in their level's rows only: the all-levels
    rows are the fold of every level's entries (and store none). A level left without a problem
    has no row (as a whole re-scoring)."""
    by_level: dict[int, list[dict]] = {}
    for row in stored:
        if row.level != ALL_LEVELS:
            by_level.setdefault(row.level, [{}, {}])[row.with_excluded] = {
                int(pid): entry for pid, entry in row.problems.items()
            }
    touched = sorted({levels[pid] for pid in changed})
    for pid, pair in changed.items():
        both = by_level.setdefault(levels[pid], [{}, {}])
        for with_excluded in (False, True):
            if pair is None:
                both[with_excluded].pop(pid, None)
            else:
                both[with_excluded][pid] = pair[with_excluded]
    fresh = []
    for level in touched:
        if by_level[level][0]:
            fresh += _folded_rows(run_id, level, *by_level[level])
    every = [{pid: e for both in by_level.values() for pid, e in both[we].items()} for we in (False, True)]
    for row in _folded_rows(run_id, ALL_LEVELS, *every):
        row.problems = {}
        fresh.append(row)
    return fresh


def _folded_rows(run_id: int, level: int, entries: dict[int, list], with_excluded: dict[int, list]) -> list[RunScore]:
    """A level's two rows (without, with excluded kernels) folded from their entries; one fold when
    no kernel of the level is excluded (the common case: the two are equal)."""
    score = scoring.fold(entries)
    score_with = score if with_excluded == entries else scoring.fold(with_excluded)
    return [to_model(run_id, level, False, score), to_model(run_id, level, True, score_with)]


def _clear_marks(marks: list[tuple[int, datetime | None]], read_at: datetime) -> None:
    """Remove the marks this re-scoring covers: those no write has marked again since they were read
    (a later write's mark stays, for the next re-scoring). Only at the end of the re-scoring's
    transaction, and skipping the marks a writer is renewing right now (they stay anyway): a mark
    deleted at the start would hold every writer of its run until the re-scoring commits, and one
    waited for here would deadlock with a writer waiting for a kernel row this re-scoring wrote.

    A mark renewed meanwhile stays, and its time moves up to when this re-scoring read the marks
    (`read_at`), or to its latest write's if that is earlier: the writes before are stored now, and
    a run written to on every pass no longer keeps its first mark's time, which would put it at the
    head of every batch, date every board build back to it and pass for a lost mark on every read."""
    if not marks:
        return
    read = dict(marks)
    held = DirtyRun.objects.select_for_update(skip_locked=True).filter(run_id__in=list(read))
    rows = list(held.values_list("run_id", "last_marked_at", "marked_at"))
    covered = [run_id for run_id, last, _ in rows if last == read[run_id]]
    renewed = [run_id for run_id, last, marked in rows if last != read[run_id] and marked < read_at]
    if covered:
        DirtyRun.objects.filter(run_id__in=covered).delete()
    if renewed:
        earliest = Least(Value(read_at, output_field=DateTimeField()), F("last_marked_at"))
        DirtyRun.objects.filter(run_id__in=renewed).update(marked_at=earliest)


def _clear_problem_marks(places: list[tuple[int, int, datetime]]) -> None:
    """Remove the problem marks this re-scoring covers: those no write renewed since they were read,
    skipping those a writer holds (as _clear_marks)."""
    if not places:
        return
    read = {(run_id, pid): last for run_id, pid, last in places}
    held = DirtyProblem.objects.select_for_update(skip_locked=True).filter(run_id__in={key[0] for key in read})
    rows = held.values_list("pk", "run_id", "problem_id", "last_marked_at")
    covered = [pk for pk, run_id, pid, last in rows if read.get((run_id, pid)) == last]
    if covered:
        DirtyProblem.objects.filter(pk__in=covered).delete()


def _move_counts(old: dict[int, Counter], new: dict[int, Counter], exact: bool) -> None:
    """Move the runs' and problems' stored kernel counts from `old` to `new` ({run id: kernels per
    problem}). `exact` (a whole re-scoring, whose `new` has every problem of each run): set each
    run's count, which mends a wrong one; else move it by the difference."""
    by_change: dict[int, list[int]] = defaultdict(list)
    for run_id in new.keys() | old.keys():
        count, before = sum(new.get(run_id, Counter()).values()), sum(old.get(run_id, Counter()).values())
        if exact:
            by_change[count].append(run_id)
        elif count != before:
            by_change[count - before].append(run_id)
    for change, run_ids in by_change.items():
        Run.objects.filter(pk__in=run_ids).update(n_kernels=change if exact else F("n_kernels") + change)
    deltas: Counter = Counter()
    for run_id in new.keys() | old.keys():
        deltas.update(new.get(run_id, Counter()))
        deltas.subtract(old.get(run_id, Counter()))
    adjust_problem_counts(dict(deltas))


def _store_scores(fresh: list[RunScore], stored: list[RunScore]) -> None:
    """Write the RunScore rows that differ from the stored ones, and remove those no longer there. A
    result changes its level's rows and the all-levels ones; the run's other levels stay as stored
    (most of the bytes a re-scoring would otherwise write: each row carries every problem)."""
    stored_by_key = {_key(row): row for row in stored}
    changed = [
        row for row in fresh if _key(row) not in stored_by_key or _fields(row) != _fields(stored_by_key[_key(row)])
    ]
    kept = {_key(row) for row in fresh} - {_key(row) for row in changed}
    RunScore.objects.filter(pk__in=[row.pk for key, row in stored_by_key.items() if key not in kept]).delete()
    RunScore.objects.bulk_create(changed, batch_size=500)


def _store_kernel_states(rows: list[KernelRow]) -> None:
    """Write the review state of the kernels whose state changed (rows read `with_stored`): one
    UPDATE per distinct state (a pass of the re-scorer: about one kernel per run, each its own
    speedup; a run after an import: many kernels sharing a few states). Django's bulk_update builds
    a CASE per field and row, and took 0.6 s of Python for a hundred kernels."""
    by_state: dict[tuple, list[int]] = defaultdict(list)
    for row in rows:
        if row.stored != row.state:
            by_state[row.state].append(row.pk)
    for state, pks in by_state.items():
        for start in range(0, len(pks), 500):
            Kernel.objects.filter(pk__in=pks[start : start + 500]).update(
                **dict(zip(_STATE_FIELDS, state, strict=True))
            )


def _check_speedups(rows: list[KernelRow]) -> None:
    """Infinite or absurd: not a speedup (the ways in refuse it; older rows may hold one)."""
    for row in rows:
        if (problem := speedup_problem(row.facts.speedup)) is not None:
            raise ValueError(f"kernel {row.pk} of run {row.run_id}: {problem}")


def _entries(rows: list[KernelRow]) -> dict[tuple[int, int], tuple[list, list]]:
    """{(run id, problem id): (its entry, its entry counting excluded kernels)} of these kernels."""
    kernels: dict[tuple[int, int], list[KernelFacts]] = defaultdict(list)
    for row in rows:
        kernels[(row.run_id, row.facts.problem_id)].append(row.facts)
    pairs = {}
    for key, facts in kernels.items():
        entry = scoring.problem_entry(facts)
        excluding = any(f.excluded for f in facts)
        pairs[key] = (entry, scoring.problem_entry(facts, include_excluded=True) if excluding else entry)
    return pairs


def _scores(rows: list[KernelRow], runs: dict[int, int]) -> list[RunScore]:
    """Every RunScore row of `runs` from all their kernels (`rows`): each level's, and all levels'."""
    _check_speedups(rows)
    levels = {row.facts.problem_id: row.level for row in rows}
    per_run: dict[int, dict[int, tuple | None]] = {run_id: {} for run_id in runs}
    for (run_id, pid), pair in _entries(rows).items():
        per_run[run_id][pid] = pair
    return [row for run_id, pairs in per_run.items() for row in _refolded(run_id, [], pairs, levels)]


def to_model(run_id: int, level: int, with_excluded: bool, score: LevelScore) -> RunScore:
    s0, best = score.sample0, score.best
    return RunScore(
        run_id=run_id, level=level, with_excluded=with_excluded,
        kernels=score.kernels, flagged=score.flagged, unreviewed=score.unreviewed, excluded=score.excluded,
        s0_attempted=s0.attempted, s0_compiled=s0.compiled, s0_correct=s0.correct, s0_unscored=s0.unscored,
        s0_log_sum=s0.log_sum, s0_speedups=s0.speedups.tobytes(),
        best_attempted=best.attempted, best_compiled=best.compiled, best_correct=best.correct,
        best_unscored=best.unscored, best_log_sum=best.log_sum, best_speedups=best.speedups.tobytes(),
        pass_at_1_sum=score.pass_at_1_sum, problems=score.problems, measured=score.measured,
        pub_count=score.published.correct, pub_log_sum=score.published.log_sum,
        pub_speedups=score.published.speedups.tobytes(), pub_hardware=score.published_on,
    )  # fmt: skip


_SCORE_FIELDS = (
    "run_id", "level",
    "s0_attempted", "s0_compiled", "s0_correct", "s0_unscored", "s0_speedups", "s0_log_sum",
    "best_attempted", "best_compiled", "best_correct", "best_unscored", "best_speedups", "best_log_sum",
    "pass_at_1_sum", "kernels", "flagged", "unreviewed", "excluded", "measured",
    "pub_count", "pub_speedups", "pub_log_sum", "pub_hardware",
)  # fmt: skip


def _tally(attempted, compiled, correct, unscored, packed, log_sum) -> Tally:
    speedups = array("d")
    speedups.frombytes(bytes(packed))
    return Tally(attempted, compiled, correct, unscored, speedups, log_sum)


def from_values(values: tuple) -> LevelScore:
    """A stored score (a row of _SCORE_FIELDS after run_id and level) as the LevelScore it stores."""
    pub_count, pub_speedups, pub_log_sum, pub_hardware = values[18:22]
    published = _tally(pub_count, pub_count, pub_count, 0, pub_speedups, pub_log_sum)
    return LevelScore(
        _tally(*values[0:6]), _tally(*values[6:12]), *values[12:17], measured=values[17], published=published,
        published_on=pub_hardware,
    )  # fmt: skip


def _problem_kernel_counts(run_ids: list[int]) -> Counter:
    """Kernels per problem of these runs, as stored (before re-scoring)."""
    counts: Counter = Counter()
    stored = RunScore.objects.filter(run_id__in=run_ids, with_excluded=True).exclude(level=ALL_LEVELS)
    for per_problem in _counts_by_run(stored).values():
        counts.update(per_problem)
    return counts


def _counts_by_run(rows: Iterable[RunScore]) -> defaultdict[int, Counter]:
    """{run id: kernels per problem} in these rows (their level rows with excluded kernels: the
    all-levels rows store no entries)."""
    counts: defaultdict[int, Counter] = defaultdict(Counter)
    for row in rows:
        if row.level != ALL_LEVELS and row.with_excluded:
            for pid, entry in row.problems.items():
                counts[row.run_id][int(pid)] += entry[scoring.KERNELS]
    return counts


def adjust_problem_counts(deltas: dict[int, int]) -> None:
    by_delta: dict[int, list[int]] = defaultdict(list)
    for pid, delta in deltas.items():
        if delta:
            by_delta[delta].append(pid)
    if not by_delta:
        return
    ProblemStats.objects.bulk_create([ProblemStats(problem_id=pid) for pid in deltas], ignore_conflicts=True)
    for delta, pids in by_delta.items():
        ProblemStats.objects.filter(problem_id__in=pids).update(n_kernels=F("n_kernels") + delta)


def forget_run(run_id: int) -> None:
    """Before a run is deleted: take its kernels off its problems' stored counts."""
    counts = _problem_kernel_counts([run_id])
    adjust_problem_counts({pid: -n for pid, n in counts.items()})


def bump_versions(problem_set_ids: set[int]) -> None:
    if not problem_set_ids:
        return
    BoardVersion.objects.bulk_create([BoardVersion(problem_set_id=pk) for pk in problem_set_ids], ignore_conflicts=True)
    # update() skips auto_now: the time is set here, or Last-Modified would never advance.
    BoardVersion.objects.filter(problem_set_id__in=problem_set_ids).update(
        version=F("version") + 1, updated_at=timezone.now()
    )


def bump_all_versions() -> None:
    """Every board is stale (names, problems, hardware changed), and so is the boards' catalogue of
    choices, which is filed under the oldest version (catalogue.py)."""
    bump_versions(set(ProblemSet.objects.values_list("pk", flat=True)))


# ---------------------------------------------------------------------------------------------
# reading


def stored_scores(
    problem_set: ProblemSet, runs, level: int | None, include_excluded: bool
) -> list[tuple[Run, LevelScore]]:
    """(run, its stored score on `level`) for each of `runs` (a queryset with its select_related), as
    stored (marks waiting for the re-scorer are not made up here: reads never write). Runs without a
    stored row (no kernel on the level) get an empty score."""
    runs = with_related(list(runs.select_related(None)), problem_set)
    key = ALL_LEVELS if level is None else level
    # The all-levels rows come in the same query: each run's kernels measured here (measured_here).
    scores = scores_of_runs([run.pk for run in runs], sorted({key, ALL_LEVELS}), include_excluded)
    for run in runs:
        run.measured_here = scores[(run.pk, ALL_LEVELS)].measured if (run.pk, ALL_LEVELS) in scores else 0
    return [(run, scores.get((run.pk, key)) or LevelScore()) for run in runs]


def with_related(runs: list[Run], problem_set: ProblemSet) -> list[Run]:
    """`runs` (of `problem_set`) with their model, lab and hardware attached from two small
    queries, instead of a join building four objects per row; and the scoring rules of the runs
    re-scored under other rules than the set's (a third query, only when there are any: the board
    names those rules)."""
    models = LanguageModel.objects.select_related("lab").filter(pk__in={run.model_id for run in runs})
    by_model = {model.pk: model for model in models}
    by_hardware = {hw.pk: hw for hw in Hardware.objects.filter(pk__in={run.hardware_id for run in runs})}
    other_rules = {run.rules_id for run in runs} - {problem_set.rules_id}
    by_rules = {r.pk: r for r in ScoringRules.objects.filter(pk__in=other_rules)} if other_rules else {}
    for run in runs:
        Run.model.field.set_cached_value(run, by_model[run.model_id])
        Run.hardware.field.set_cached_value(run, by_hardware[run.hardware_id])
        Run.problem_set.field.set_cached_value(run, problem_set)
        if run.rules_id in by_rules:
            Run.rules.field.set_cached_value(run, by_rules[run.rules_id])
    return runs


def scores_of_runs(run_ids: list[int], levels: list[int], include_excluded: bool) -> dict[tuple[int, int], LevelScore]:
    """{(run id, level): stored score} of these runs on these levels (0: all), in one query."""
    rows = RunScore.objects.filter(run_id__in=run_ids, level__in=levels, with_excluded=include_excluded)
    # Plain values, not model instances: a board reads thousands of rows.
    return {(run_id, level): from_values(rest) for run_id, level, *rest in rows.values_list(*_SCORE_FIELDS)}


@dataclass(frozen=True)
class BoardState:
    """Where a problem set's boards stand, read without re-scoring anything (the request path)."""

    version: int
    updated_at: datetime | None  # when the version last moved: None before the first re-scoring
    dirty_since: datetime | None  # the oldest mark still waiting for its re-scoring, if any

    @property
    def key(self) -> tuple[int, str]:
        """The version as a build records it: with its time, since a database rebuilt from scratch
        restarts versions."""
        return self.version, self.updated_at.isoformat() if self.updated_at else ""


def board_state(problem_set: ProblemSet | None) -> BoardState:
    """The version of a problem set's boards and its oldest dirty mark, in one query."""
    if problem_set is None:
        return BoardState(0, None, None)
    of_set = Run.objects.filter(problem_set=problem_set).values("pk")
    oldest_mark = (
        DirtyRun.objects.filter(run_id__in=of_set, failed_at__isnull=True).order_by("marked_at").values("marked_at")[:1]
    )
    row = (
        BoardVersion.objects.filter(problem_set=problem_set)
        .annotate(dirty_since=Subquery(oldest_mark))
        .values_list("version", "updated_at", "dirty_since")
        .first()
    )
    # No row: nothing was ever scored in the set, and nothing of it is kept built.
    return BoardState(*row) if row else BoardState(0, None, None)


# ---------------------------------------------------------------------------------------------
# rebuilding and verifying everything


def rebuild_all(write: Callable[[str], None] = lambda _: None) -> int:
    """Re-score every run, in batches; recount every problem's kernels. Returns the runs re-scored."""
    ids = list(Run.objects.order_by("pk").values_list("pk", flat=True))
    for start in range(0, len(ids), BATCH):
        refresh_runs(ids[start : start + BATCH])
        write(f"re-scored {min(start + BATCH, len(ids))} of {len(ids)} runs")
    recount_problems()
    return len(ids)


def recount_problems() -> None:
    from django.db.models import Count  # deferred: only the rebuild counts

    counts = dict(Problem.objects.annotate(n=Count("kernels")).values_list("pk", "n"))
    with transaction.atomic():
        ProblemStats.objects.all().delete()
        ProblemStats.objects.bulk_create([ProblemStats(problem_id=pk, n_kernels=n) for pk, n in counts.items()])


def verify_all(write: Callable[[str], None] = lambda _: None, run_ids: list[int] | None = None) -> list[str]:
    """Compare every stored RunScore (of `run_ids` only, when given) with a fresh computation; the
    differences, described."""
    problems: list[str] = []
    chosen = Run.objects.all() if run_ids is None else Run.objects.filter(pk__in=run_ids)
    ids = list(chosen.order_by("pk").values_list("pk", flat=True))
    for start in range(0, len(ids), BATCH):
        batch = ids[start : start + BATCH]
        runs = dict(Run.objects.filter(pk__in=batch).values_list("pk", "problem_set_id"))
        fresh = {_key(row): row for row in _scores(kernel_rows(Kernel.objects.filter(run_id__in=batch)), runs)}
        stored = {_key(row): row for row in RunScore.objects.filter(run_id__in=batch)}
        for key in sorted(set(fresh) | set(stored)):
            if key not in stored or key not in fresh or _fields(stored[key]) != _fields(fresh[key]):
                problems.append(f"run {key[0]} level {key[1] or 'all'} with_excluded={key[2]}: stored differs")
        write(f"verified {min(start + BATCH, len(ids))} of {len(ids)} runs")
    return problems


def _key(row: RunScore) -> tuple[int, int, bool]:
    return row.run_id, row.level, row.with_excluded


def _fields(row: RunScore) -> dict:
    values = {f.attname: getattr(row, f.attname) for f in RunScore._meta.concrete_fields}
    for name in ("id", "updated_at"):
        values.pop(name)
    values["s0_speedups"] = bytes(values["s0_speedups"])
    values["best_speedups"] = bytes(values["best_speedups"])
    values["problems"] = {str(pid): outcome for pid, outcome in values["problems"].items()}
    return values


# ---------------------------------------------------------------------------------------------
# measured here: the one count every page reads (board, overview, run page, review queue)


def measured_here(run_ids: Iterable[int]) -> dict[int, int]:
    """{run id: its kernels whose latest evaluation was measured here}, as stored (one query). A
    run with any is verified here, whatever its origin: every page that says "measured here" or
    "verified" of a run reads this (or a row's `measured`, the same stored number)."""
    rows = RunScore.objects.filter(run_id__in=list(run_ids), level=ALL_LEVELS, with_excluded=True)
    return dict(rows.values_list("run_id", "measured"))


def attach_measured(runs: Iterable[Run]) -> None:
    """Set `run.measured_here` (measured_here's count) on each of `runs`, in one query."""
    runs = list(runs)
    counts = measured_here({run.pk for run in runs})
    for run in runs:
        run.measured_here = counts.get(run.pk, 0)


def runs_measured_here():
    """The runs verified here (not demo data): at least one kernel measured here, stored."""
    stored = RunScore.objects.filter(level=ALL_LEVELS, with_excluded=True, measured__gt=0)
    return Run.objects.filter(is_demo=False, pk__in=stored.values("run_id"))
