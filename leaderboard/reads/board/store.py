"""The boards' read model: per run and level, the stored aggregates every board reads (RunScore),
the kernels' stored review state, and stored kernel counts on runs and problems.

How it stays current:

1. A write that changes a run's inputs (a kernel, an evaluation, a review, a report; run and
   baseline imports; deletions) calls `mark_runs(run_ids)`, directly or through the model signals in
   leaderboard/reads/board/signals.py. That records a DirtyRun row in the writing transaction and
   schedules `refresh_runs` for after its commit (once per run and transaction).
2. `refresh_runs` re-scores whole runs, idempotently: one query reads the runs' kernels with the
   reference review rules (KernelQuerySet.with_review_state), and bulk writes store the kernels'
   review state, the RunScore rows, the runs' and problems' kernel counts and the board version.
3. Board builds call `refresh_dirty` first, so a refresh lost with a dying process (or never run,
   as inside a test's transaction) is made up before anything stale is built. Requests do not:
   they read `board_state` (one query) and are served the last complete build
   (leaderboard/reads/board/served.py).

`rebuild_all` re-scores everything and `verify_all` compares stored rows with a fresh computation
(`manage.py rebuild_boards [--verify]`).
"""

from __future__ import annotations

import logging
import threading
from array import array
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime

from django.db import DatabaseError, OperationalError, transaction
from django.db.models import F, Subquery
from django.utils import timezone

from evaluation.metrics import speedup_problem
from leaderboard.models import (
    BoardVersion,
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
from problems.models import Hardware, ProblemSet, ScoringRules

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


def kernel_rows(kernels: KernelQuerySet) -> list[KernelRow]:
    """Each kernel's scoring facts and review state by the reference rules, in one query."""
    rows = kernels.order_by().with_review_state().values_list(*_FACT_FIELDS)
    result = []
    for pk, run_id, level, problem_id, sample, compiled, correct, speedup, *review in rows:
        flagged, pending, excluded, verdict, reported_at, evaluated_at, created_at, origin, published, on = review
        facts = KernelFacts(
            problem_id, sample, compiled, correct, speedup, bool(flagged), bool(pending), bool(excluded),
            origin == Origin.MEASURED, published, on,
        )  # fmt: skip
        queued_at = (reported_at or evaluated_at or created_at) if pending else None
        ranked = ranked_speedup(origin, speedup, published)
        state = (verdict or "", bool(pending), bool(excluded), bool(flagged), queued_at, speedup, ranked)
        result.append(KernelRow(pk, run_id, level, facts, state))
    return result


def ranked_speedup(origin: str | None, speedup: float | None, published: float | None) -> float | None:
    """The speedup a kernel ranks by on the problem page and the grid: measured here when it was
    (None when it failed here: a published figure does not outrank a failure here), else its
    latest evaluation's, else the published figure."""
    if origin == Origin.MEASURED or speedup is not None:
        return speedup
    return published


# ---------------------------------------------------------------------------------------------
# scheduling: mark in the transaction, refresh after commit


_local = threading.local()


def mark_runs(run_ids: Iterable[int]) -> None:
    """Record that these runs need re-scoring, and re-score them after the current transaction
    commits (at once outside a transaction). Cheap to call once per write: repeated calls in one
    transaction mark each run once."""
    ids = {run_id for run_id in run_ids if run_id is not None}
    if not ids:
        return
    connection = transaction.get_connection()
    if not connection.in_atomic_block:
        refresh_runs(ids)
        return
    pending = _pending_ids(connection)
    new = ids - pending
    if new:
        DirtyRun.objects.bulk_create([DirtyRun(run_id=run_id) for run_id in new], ignore_conflicts=True)
        pending.update(new)


def _pending_ids(connection) -> set[int]:
    """The run ids already marked in this transaction (a new set, and one after-commit refresh,
    per transaction: a set whose refresh a rollback discarded is not reused)."""
    current = getattr(_local, "pending", None)
    if current is not None and any(entry[1] is current[1] for entry in connection.run_on_commit):
        return current[0]
    ids: set[int] = set()

    def refresh_after_commit() -> None:
        if getattr(_local, "pending", None) is state:
            _local.pending = None
        refresh_runs(ids)

    state = (ids, refresh_after_commit)
    _local.pending = state
    # robust: a failed re-scoring must not fail the write that committed (the mark stays; the next
    # read or refresh makes it up).
    transaction.on_commit(refresh_after_commit, robust=True)
    return ids


def refresh_dirty(problem_set: ProblemSet | None = None) -> int:
    """Re-score the runs still marked dirty (of one problem set, or all); how many there were."""
    dirty = DirtyRun.objects.filter(failed_at__isnull=True)  # set-aside runs wait for a write or a rebuild
    if problem_set is not None:
        dirty = dirty.filter(run_id__in=Run.objects.filter(problem_set=problem_set).values("pk"))
    ids = list(dirty.values_list("run_id", flat=True))
    if ids:
        refresh_runs(ids)
    return len(ids)


def mark_kernels(kernel_ids: Iterable[int]) -> None:
    """Re-score the runs of these kernels (review, report and flag writes)."""
    mark_runs(set(Kernel.objects.filter(pk__in=list(kernel_ids)).values_list("run_id", flat=True)))


def refresh_kernel_states(kernel_ids: Iterable[int]) -> None:
    """Store the review state of these kernels now (in the current transaction): the queue reads it."""
    rows = kernel_rows(Kernel.objects.filter(pk__in=list(kernel_ids)))
    _store_kernel_states(rows, _stored_states([row.pk for row in rows]))


# ---------------------------------------------------------------------------------------------
# re-scoring runs


def refresh_runs(run_ids: Iterable[int]) -> None:
    """Re-score whole runs, idempotently, in one transaction: their kernels' review state, RunScore
    rows, kernel counts and the board version of their problem sets. A batch that fails is re-scored
    run by run, and a run that fails alone is set aside (set_aside): one bad run never takes the
    boards down (issue 28, case 1)."""
    ids = sorted(set(run_ids))
    if not ids:
        return
    pending = getattr(_local, "pending", None)
    if pending is not None:  # re-scored now: a later write in this transaction must mark them again
        pending[0].difference_update(ids)
    try:
        _refresh(ids)
    except OperationalError:
        raise  # the database is unwell (down, a deadlock): not the runs' fault, and retried as before
    except (DatabaseError, ValueError, TypeError, ArithmeticError) as exc:
        if len(ids) > 1:
            for run_id in ids:
                refresh_runs([run_id])
        else:
            set_aside(ids[0], exc)


def set_aside(run_id: int, exc: Exception) -> None:
    """Keep a run that fails to score off the refresh path: its DirtyRun row says when and why
    (admin; /healthz "degraded"; the kb_runs_set_aside metric), and its stored scores stay."""
    log.error("run %s fails to score and is set aside: %s", run_id, exc, exc_info=True)
    DirtyRun.objects.update_or_create(
        run_id=run_id, defaults={"failed_at": timezone.now(), "error": f"{type(exc).__name__}: {exc}"[:2000]}
    )


def set_aside_runs() -> list[DirtyRun]:
    return list(DirtyRun.objects.filter(failed_at__isnull=False).order_by("failed_at"))


def _refresh(ids: list[int]) -> None:
    with transaction.atomic():
        # Lock the runs: concurrent refreshes of one run (two workers, a reader) take turns.
        runs = dict(
            Run.objects.select_for_update().filter(pk__in=ids).order_by("pk").values_list("pk", "problem_set_id")
        )
        DirtyRun.objects.filter(run_id__in=ids).delete()
        rows = kernel_rows(Kernel.objects.filter(run_id__in=list(runs)))
        _store_kernel_states(rows, _stored_states([row.pk for row in rows]))
        old_counts = _problem_kernel_counts(ids)
        RunScore.objects.filter(run_id__in=ids).delete()
        RunScore.objects.bulk_create(_scores(rows, runs), batch_size=500)
        _store_counts(rows, runs, old_counts)
        bump_versions(set(runs.values()))


def _stored_states(kernel_ids: list[int]) -> dict[int, tuple]:
    if not kernel_ids:
        return {}
    rows = Kernel.objects.filter(pk__in=kernel_ids).order_by().values_list("pk", *_STATE_FIELDS)
    return {pk: tuple(state) for pk, *state in rows}


def _store_kernel_states(rows: list[KernelRow], stored: dict[int, tuple]) -> None:
    """Write the review state of the kernels whose state changed, in bulk (usually one kernel: the
    one just evaluated or reviewed; a whole run after an import)."""
    changed = [
        Kernel(pk=row.pk, **dict(zip(_STATE_FIELDS, row.state, strict=True)))
        for row in rows
        if stored.get(row.pk) != row.state
    ]
    Kernel.objects.bulk_update(changed, _STATE_FIELDS, batch_size=500)


def _scores(rows: list[KernelRow], runs: dict[int, int]) -> list[RunScore]:
    by_level: dict[tuple[int, int], list[KernelFacts]] = defaultdict(list)
    for row in rows:
        by_level[(row.run_id, row.level)].append(row.facts)
        by_level[(row.run_id, ALL_LEVELS)].append(row.facts)
    for run_id in runs:
        by_level.setdefault((run_id, ALL_LEVELS), [])
    kernels_per_problem = Counter((row.run_id, row.facts.problem_id) for row in rows)
    scores = []
    for row in rows:  # infinite or absurd: not a speedup (the ways in refuse it; older rows may hold one)
        if (problem := speedup_problem(row.facts.speedup)) is not None:
            raise ValueError(f"kernel {row.pk} of run {row.run_id}: {problem}")
    for (run_id, level), facts in by_level.items():
        score = scoring.level_score(facts)
        # Without an excluded kernel, counting the excluded ones changes nothing: scored once.
        with_excluded = scoring.level_score(facts, include_excluded=True) if any(f.excluded for f in facts) else score
        scores.append(to_model(run_id, level, False, score, kernels_per_problem))
        scores.append(to_model(run_id, level, True, with_excluded, kernels_per_problem))
    return scores


def to_model(run_id: int, level: int, with_excluded: bool, score: LevelScore, kernels: Counter) -> RunScore:
    s0, best = score.sample0, score.best
    problems = {pid: [*outcome, kernels[(run_id, pid)]] for pid, outcome in score.problems.items()}
    return RunScore(
        run_id=run_id, level=level, with_excluded=with_excluded,
        kernels=score.kernels, flagged=score.flagged, unreviewed=score.unreviewed, excluded=score.excluded,
        s0_attempted=s0.attempted, s0_compiled=s0.compiled, s0_correct=s0.correct, s0_unscored=s0.unscored,
        s0_log_sum=s0.log_sum, s0_speedups=s0.speedups.tobytes(),
        best_attempted=best.attempted, best_compiled=best.compiled, best_correct=best.correct,
        best_unscored=best.unscored, best_log_sum=best.log_sum, best_speedups=best.speedups.tobytes(),
        pass_at_1_sum=score.pass_at_1_sum, problems=problems, measured=score.measured,
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
    stored = RunScore.objects.filter(run_id__in=run_ids, level=ALL_LEVELS, with_excluded=True)
    for problems in stored.values_list("problems", flat=True):
        for pid, outcome in problems.items():
            counts[int(pid)] += outcome[3]
    return counts


def _store_counts(rows: list[KernelRow], runs: dict[int, int], old: Counter) -> None:
    """Kernel counts on runs and problems: runs set, problems moved by the difference."""
    per_run = Counter(row.run_id for row in rows)
    by_count: dict[int, list[int]] = defaultdict(list)
    for run_id in runs:
        by_count[per_run[run_id]].append(run_id)
    for count, run_ids in by_count.items():
        Run.objects.filter(pk__in=run_ids).update(n_kernels=count)
    new = Counter(row.facts.problem_id for row in rows)
    adjust_problem_counts({pid: new[pid] - old[pid] for pid in set(new) | set(old)})


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
    bump_versions(set(ProblemSet.objects.values_list("pk", flat=True)))


# ---------------------------------------------------------------------------------------------
# reading


def stored_scores(
    problem_set: ProblemSet, runs, level: int | None, include_excluded: bool
) -> list[tuple[Run, LevelScore]]:
    """(run, its stored score on `level`) for each of `runs` (a queryset with its select_related),
    made current first. Runs without a stored row (no kernel on the level) get an empty score."""
    refresh_dirty(problem_set)
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
    oldest_mark = DirtyRun.objects.filter(run_id__in=of_set, failed_at__isnull=True).order_by("marked_at").values("marked_at")[:1]
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

    from problems.models import Problem  # deferred: only the rebuild counts

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
