"""The boards' stored rows, read only: per run and level the aggregates every board reads (RunScore,
folded by leaderboard/boards/scoring.py), the kernels' stored review state, the runs' and problems'
kernel counts, and the state a kept board is dated by (`board_state`: the read model's version and
the oldest mark still waiting). Nothing here writes; leaderboard/boards/rescoring.py is the one
writer of these rows, leaderboard/boards/marks.py what every write calls."""

from __future__ import annotations

from array import array
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cache
from typing import Any

from django.db import connection
from django.db.models import QuerySet
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from leaderboard.boards.scoring import STANDARD_PS, KernelFacts, LevelScore, Tally
from leaderboard.evaluations.clock import db_now
from leaderboard.models import (
    BoardVersion,
    DirtyRun,
    Evaluation,
    Kernel,
    KernelQuerySet,
    LanguageModel,
    Origin,
    Run,
    RunScore,
)
from problems.models import Hardware, ProblemSet, ScoringRules

ALL_LEVELS = 0  # RunScore.level of the all-levels row


FACT_FIELDS = (
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


STATE_FIELDS = (
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
    state: tuple  # the review state the rules give now (as STATE_FIELDS)
    stored: tuple | None = None  # the review state stored on the kernel, when asked for


def kernel_rows(kernels: KernelQuerySet, with_stored: bool = False) -> list[KernelRow]:
    """Each kernel's scoring facts and review state by the reference rules (and the state stored,
    `with_stored`), in one query."""
    fields = (*FACT_FIELDS, *STATE_FIELDS) if with_stored else FACT_FIELDS
    result = []
    for values in kernels.order_by().with_review_state().values_list(*fields):
        pk, run_id, level, problem_id, sample, compiled, correct, speedup, *review = values[: len(FACT_FIELDS)]
        flagged, pending, excluded, verdict, reported_at, evaluated_at, created_at, origin, published, on = review
        facts = KernelFacts(
            problem_id, sample, compiled, correct, speedup, bool(flagged), bool(pending), bool(excluded),
            origin == Origin.MEASURED, published, on,
        )  # fmt: skip
        queued_at = (reported_at or evaluated_at or created_at) if pending else None
        ranked = ranked_speedup(origin, speedup, published)
        state = (verdict or "", bool(pending), bool(excluded), bool(flagged), queued_at, speedup, ranked)
        stored = tuple(values[len(FACT_FIELDS) :]) if with_stored else None
        result.append(KernelRow(pk, run_id, level, facts, state, stored))
    return result


def ranked_speedup(origin: str | None, speedup: float | None, published: float | None) -> float | None:
    """The speedup a kernel ranks by on the problem page and the grid: measured here when it was
    (None when it failed here: a published figure does not outrank a failure here), else its
    latest evaluation's, else the published figure."""
    if origin == Origin.MEASURED or speedup is not None:
        return speedup
    return published


def waiting_marks():
    return DirtyRun.objects.filter(failed_at__isnull=True)  # set-aside runs wait for a write or a rebuild


def oldest_mark_seconds() -> float:
    """How long the oldest mark still to be re-scored has waited (0 when none waits)."""
    oldest = waiting_marks().order_by("marked_at").values_list("marked_at", flat=True).first()
    return (db_now() - oldest).total_seconds() if oldest else 0.0


def set_aside_runs() -> list[DirtyRun]:
    return list(DirtyRun.objects.filter(failed_at__isnull=False).order_by("failed_at"))


def to_model(run_id: int, level: int, with_excluded: bool, score: LevelScore) -> RunScore:
    return RunScore(run_id=run_id, level=level, with_excluded=with_excluded, problems=score.problems, **columns(score))


def columns(score: LevelScore) -> dict[str, Any]:
    """A score's stored columns but the row's key and entries ({attname: value}), as `to_model`
    stores them: what the re-scorer's patches write without making model instances."""
    s0, best = score.sample0, score.best
    return dict(
        kernels=score.kernels, flagged=score.flagged, unreviewed=score.unreviewed, excluded=score.excluded,
        s0_attempted=s0.attempted, s0_compiled=s0.compiled, s0_correct=s0.correct, s0_unscored=s0.unscored,
        s0_log_sum=s0.log_sum, s0_speedups=s0.speedups.tobytes(),
        best_attempted=best.attempted, best_compiled=best.compiled, best_correct=best.correct,
        best_unscored=best.unscored, best_log_sum=best.log_sum, best_speedups=best.speedups.tobytes(),
        pass_at_1_sum=score.pass_at_1_sum, measured=score.measured,
        pub_count=score.published.correct, pub_log_sum=score.published.log_sum,
        pub_speedups=score.published.speedups.tobytes(), pub_hardware=score.published_on,
        **dict(zip(ABOVE_COLUMNS, above_counts(score), strict=True)),
    )  # fmt: skip


def above_column(source: str, p: float) -> str:
    """The RunScore column of fast_p's count at a standard p: `s0_above_1_5` (source s0, best, pub)."""
    return f"{source}_above_{p:g}".replace(".", "_")


ABOVE_SOURCES = ("s0", "best", "pub")
ABOVE_COLUMNS = tuple(above_column(source, p) for source in ABOVE_SOURCES for p in STANDARD_PS)


def above_counts(score: LevelScore) -> list[int]:
    """The values of ABOVE_COLUMNS for a score: each source's problems above each standard p."""
    return [tally.above(p) for tally in (score.sample0, score.best, score.published) for p in STANDARD_PS]


def above_counts_packed(*packed: bytes) -> list[int]:
    """above_counts from the packed sorted speedups of sample 0, best-of-n and published (the set-based
    rebuild's rows)."""
    tallies = [Tally(speedups=array("d", bytes(values))) for values in packed]
    return [tally.above(p) for tally in tallies for p in STANDARD_PS]


SCORE_FIELDS = (
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
    """A stored score (a row of SCORE_FIELDS after run_id and level) as the LevelScore it stores."""
    pub_count, pub_speedups, pub_log_sum, pub_hardware = values[18:22]
    published = _tally(pub_count, pub_count, pub_count, 0, pub_speedups, pub_log_sum)
    return LevelScore(
        _tally(*values[0:6]), _tally(*values[6:12]), *values[12:17], measured=values[17], published=published,
        published_on=pub_hardware,
    )  # fmt: skip


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
    return {(run_id, level): from_values(rest) for run_id, level, *rest in rows.values_list(*SCORE_FIELDS)}


def stored_level_scores(rows: QuerySet[RunScore]) -> dict[int, dict[tuple[int, bool], LevelScore]]:
    """{run id: {(level, with_excluded): its stored score}} of these rows, their entries not read
    (what scoring.merge needs of the levels a result leaves alone)."""
    scores: dict[int, dict[tuple[int, bool], LevelScore]] = {}
    for run_id, level, with_excluded, *rest in rows.values_list(*SCORE_FIELDS[:2], "with_excluded", *SCORE_FIELDS[2:]):
        scores.setdefault(run_id, {})[(level, with_excluded)] = from_values(tuple(rest))
    return scores


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


# The two states a kept board's request reads, written in SQL: the ORM compiled board_state's
# query in about 2 ms, five times what PostgreSQL took to run it (2.5 ms against 0.45 a call at 20k,
# in-process), on every board request.
_BOARD_STATE = """
    SELECT v.version, v.updated_at,
        (SELECT d.marked_at FROM {dirty} d
         WHERE d.failed_at IS NULL AND d.run_id IN (SELECT r.id FROM {run} r WHERE r.problem_set_id = %s)
         ORDER BY d.marked_at LIMIT 1)
    FROM {version} v WHERE v.problem_set_id = %s"""

_EVERY_SET_STATE = """
    SELECT COALESCE(SUM(v.version), 0), MAX(v.updated_at),
        (SELECT MIN(d.marked_at) FROM {dirty} d WHERE d.failed_at IS NULL)
    FROM {version} v"""


class _Tables(dict):
    """The tables a read model's SQL names; any other {name} stays for the caller to fill."""

    def __missing__(self, name: str) -> str:
        return "{" + name + "}"


@cache  # the models' tables are fixed once the apps are loaded
def with_tables(template: str) -> str:
    """SQL `template` with {version}, {dirty}, {evaluation}, {kernel} and {run} named as the models'
    tables (the SQL the request path reads in place of the ORM's compiling: this module's states,
    leaderboard/reads/page_signatures.py, the catalogue's key)."""
    models = {"version": BoardVersion, "dirty": DirtyRun, "evaluation": Evaluation, "kernel": Kernel, "run": Run}
    return template.format_map(_Tables({name: model._meta.db_table for name, model in models.items()}))


def _moment(value: datetime | str | None) -> datetime | None:
    """A timestamp as a cursor gives it (a datetime on PostgreSQL, Django's stored text on SQLite)
    as the ORM gives it: aware."""
    if isinstance(value, str):
        value = parse_datetime(value)
    if value is None or timezone.is_aware(value):
        return value
    return timezone.make_aware(value, UTC)  # Django stores UTC (USE_TZ)


def board_state(problem_set: ProblemSet | None) -> BoardState:
    """The version of a problem set's boards and its oldest dirty mark, in one query."""
    if problem_set is None:
        return BoardState(0, None, None)
    with connection.cursor() as cursor:
        cursor.execute(with_tables(_BOARD_STATE), [problem_set.pk, problem_set.pk])
        row = cursor.fetchone()
    # No row: nothing was ever scored in the set, and nothing of it is kept built.
    if row is None:
        return BoardState(0, None, None)
    version, updated_at, dirty_since = row
    return BoardState(version, _moment(updated_at), _moment(dirty_since))


def every_set_state() -> BoardState:
    """The state of every problem set's boards at once, for the pages that show runs of any set (a
    model's page, the lists of models, problems and reported scores): the versions' sum, which any
    set's bump moves (so that one bump since a build is a sum one higher, as `served` reads it), the
    last time one moved, and the oldest mark still waiting in any set. One query."""
    with connection.cursor() as cursor:
        cursor.execute(with_tables(_EVERY_SET_STATE))
        version, updated_at, dirty_since = cursor.fetchone()
    return BoardState(int(version), _moment(updated_at), _moment(dirty_since))


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
