"""The one writer of the boards' stored rows (leaderboard/boards/stored.py): re-scoring marked runs,
whole or by problem (`_fold_problems`, patched by difference through leaderboard/boards/patches.py
or folded: to the bit what a whole re-scoring stores), as the
background re-scorer takes them (`rescore_oldest`, leaderboard/boards/rescorer.py), as a writer
does after its commit where no re-scorer runs (`refresh_runs`), and all at once (`rebuild_all`,
`verify_all`: `manage.py rebuild_boards`). How the whole stays current: leaderboard/boards/marks.py."""

from __future__ import annotations

import logging
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from datetime import datetime

from django.db import DatabaseError, OperationalError, connection, transaction
from django.db.models import DateTimeField, Exists, F, OuterRef, Q, Subquery, Value
from django.db.models.functions import Least
from django.utils import timezone

from evaluation.results.metrics import speedup_problem
from leaderboard.boards import bulk, marked_here, patches, scoring
from leaderboard.boards.scoring import KernelFacts, LevelScore
from leaderboard.boards.stored import (
    ALL_LEVELS,
    STATE_FIELDS,
    KernelRow,
    kernel_rows,
    stored_level_scores,
    to_model,
    waiting_marks,
)
from leaderboard.evaluations.clock import db_now
from leaderboard.models import (
    BoardVersion,
    DirtyProblem,
    DirtyRun,
    Kernel,
    ProblemStats,
    Run,
    RunScore,
)
from problems.models import Problem, ProblemSet

log = logging.getLogger(__name__)


BATCH = 200  # runs re-scored per transaction by rebuild_all


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
    marks = waiting_marks()
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
    ids = list(waiting_marks().order_by("run_id").values_list("run_id", flat=True))
    for start in range(0, len(ids), BATCH):
        refresh_runs(ids[start : start + BATCH], follow_marks=True)
    return len(ids)


def refresh_kernel_states(kernel_ids: Iterable[int]) -> None:
    """Store the review state of these kernels now (in the current transaction): the queue reads it."""
    _store_kernel_states(kernel_rows(Kernel.objects.filter(pk__in=list(kernel_ids)), with_stored=True))


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
    marked_here.forget_marked(ids)
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
    their review state, and replace their entries in the run's stored rows, exactly as a whole
    re-scoring would store them: patched by the difference between old and new entries
    (patches.patch_runs: the level's other entries stay in the database), or, for a run whose rows
    cannot take a patch, its levels folded again from their entries (`_fold_stored`). The runs
    neither can take (a stored row missing or in an older form, a problem deleted since) are
    returned, untouched."""
    levels = dict(Problem.objects.filter(pk__in={p for ps in partial.values() for p in ps}).values_list("pk", "level"))
    partial = {run_id: pids for run_id, pids in partial.items() if pids <= levels.keys()}
    places = Q()
    for run_id, pids in partial.items():
        places |= Q(run_id=run_id, problem_id__in=pids)
    rows = kernel_rows(Kernel.objects.filter(places), with_stored=True) if partial else []
    _check_speedups(rows)
    _store_kernel_states(rows)
    entries = _entries(rows)
    changed = {run_id: {pid: entries.get((run_id, pid)) for pid in pids} for run_id, pids in partial.items()}
    before = patches.patch_runs(changed, levels)
    _move_counts(before, {run_id: _kernels(changed[run_id]) for run_id in before}, exact=False)
    folded = _fold_stored({run_id: pairs for run_id, pairs in changed.items() if run_id not in before}, levels)
    return set(partial) - set(before) - folded


def _kernels(pairs: dict[int, tuple | None]) -> Counter:
    """Kernels per problem of these new entries (a problem without kernels has none)."""
    return Counter({pid: pair[0][scoring.KERNELS] for pid, pair in pairs.items() if pair is not None})


def _fold_stored(changed: dict[int, dict[int, tuple | None]], levels: dict[int, int]) -> set[int]:
    """The fold for the runs a patch cannot take ({run id: {problem id: new entries}}): their rows of
    the changed levels and of all levels read, those levels folded again from their stored entries
    with the changed ones replaced (scoring.fold), all levels merged from them and the other levels'
    stored aggregates (scoring.merge; the other levels' entries are not read). The runs it folded."""
    read = Q()
    for run_id, pairs in changed.items():  # the changed problems' levels and all levels: the rows a fold rewrites
        read |= Q(run_id=run_id, level__in=[ALL_LEVELS, *{levels[pid] for pid in pairs}])
    stored_by_run: dict[int, list[RunScore]] = defaultdict(list)
    others: dict[int, dict[tuple[int, bool], LevelScore]] = defaultdict(dict)
    if changed:
        for row in RunScore.objects.filter(read):
            stored_by_run[row.run_id].append(row)
        others.update(stored_level_scores(RunScore.objects.filter(run_id__in=list(changed)).exclude(read)))
    foldable = {run_id for run_id in changed if _foldable(stored_by_run[run_id], others[run_id])}
    fresh, stored, old, new = [], [], {}, {}
    for run_id in foldable:
        fresh += _refolded(run_id, stored_by_run[run_id], others[run_id], changed[run_id], levels)
        stored += stored_by_run[run_id]
        counted = _counts_by_run(stored_by_run[run_id])[run_id]
        old[run_id] = Counter({pid: n for pid, n in counted.items() if pid in changed[run_id]})
        new[run_id] = _kernels(changed[run_id])
    _store_scores(fresh, stored)
    _move_counts(old, new, exact=False)  # old and new of the changed problems only
    return foldable


def _foldable(stored: list[RunScore], others: dict[tuple[int, bool], LevelScore]) -> bool:
    """Whether a run's stored rows can take a fold: both all-levels rows there (and without
    entries), each level's two rows there, every entry it rewrites whole (not an older form)."""
    keys = {(row.level, row.with_excluded) for row in stored} | others.keys()
    return (
        all((level, not we) in keys for level, we in keys)
        and (ALL_LEVELS, False) in keys
        and all(not row.problems for row in stored if row.level == ALL_LEVELS)
        and all(len(entry) == scoring.ENTRY_LENGTH for row in stored for entry in row.problems.values())
    )


def _refolded(
    run_id: int,
    stored: list[RunScore],
    others: dict[tuple[int, bool], LevelScore],
    changed: dict[int, tuple | None],
    levels: dict[int, int],
) -> list[RunScore]:
    """The run's rows of the changed problems' levels and of all levels: `stored` (its rows of those
    levels) with those problems' entries replaced by `changed` ({problem id: (entry, entry counting
    excluded kernels), or None: no kernel left}), folded again, and all levels merged from them and
    `others` (the stored scores of its other levels: {(level, with_excluded): score}). Entries are
    stored in their level's rows only. A level left without a problem has no row (as a whole
    re-scoring)."""
    by_level: dict[int, list[dict]] = {}
    for row in stored:
        if row.level != ALL_LEVELS:
            by_level.setdefault(row.level, [{}, {}])[row.with_excluded] = {
                int(pid): entry for pid, entry in row.problems.items()
            }
    for pid, pair in changed.items():
        both = by_level.setdefault(levels[pid], [{}, {}])
        for with_excluded in (False, True):
            if pair is None:
                both[with_excluded].pop(pid, None)
            else:
                both[with_excluded][pid] = pair[with_excluded]
    scores = dict(others)
    fresh = []
    for level, (entries, with_excluded) in sorted(by_level.items()):
        if entries:
            scores[(level, False)], scores[(level, True)] = _folded(entries, with_excluded)
            fresh += [to_model(run_id, level, we, scores[(level, we)]) for we in (False, True)]
    for we in (False, True):
        merged = scoring.merge(score for (level, w), score in sorted(scores.items()) if w == we)
        merged.problems = {}
        fresh.append(to_model(run_id, ALL_LEVELS, we, merged))
    return fresh


def _folded(entries: dict[int, list], with_excluded: dict[int, list]) -> tuple[LevelScore, LevelScore]:
    """A level's two scores (without, with excluded kernels) folded from their entries; one fold
    when no kernel of the level is excluded (the common case: the two are equal)."""
    score = scoring.fold(entries)
    return score, score if with_excluded == entries else scoring.fold(with_excluded)


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
    """Write the review state of the kernels whose state changed (rows read `with_stored`): on
    PostgreSQL in one UPDATE (a pass of the re-scorer: about one kernel per run, each its own
    speedup, which made a statement per kernel), elsewhere one UPDATE per distinct state (a run
    after an import: many kernels sharing a few states). Django's bulk_update builds a CASE per
    field and row, and took 0.6 s of Python for a hundred kernels."""
    changed = [row for row in rows if row.stored != row.state]
    if connection.vendor == "postgresql":
        for start in range(0, len(changed), 5000):
            part = changed[start : start + 5000]
            bulk.update_rows(Kernel, STATE_FIELDS, [row.pk for row in part], [row.state for row in part])
        return
    by_state: dict[tuple, list[int]] = defaultdict(list)
    for row in changed:
        by_state[row.state].append(row.pk)
    for state, pks in by_state.items():
        for start in range(0, len(pks), 500):
            Kernel.objects.filter(pk__in=pks[start : start + 500]).update(**dict(zip(STATE_FIELDS, state, strict=True)))


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
    return [row for run_id, pairs in per_run.items() for row in _refolded(run_id, [], {}, pairs, levels)]


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
