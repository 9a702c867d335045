"""Rebuilding the boards' whole read model at once (`manage.py rebuild_boards`), and checking it on
a sample of runs.

board_rescoring.refresh_runs re-scores a few runs after a write; run over every run (board_rescoring.rebuild_all) it
spends most of its time writing kernels' review state and scores in small batches. A whole rebuild
on PostgreSQL goes by sets instead, in one transaction:

1. the kernels' stored review state, by one UPDATE from the reference rules' own query
   (KernelQuerySet.with_review_state), writing only the kernels whose state changed;
2. the runs' and problems' kernel counts, by one UPDATE and one recount;
3. the RunScore rows, from the stored state just written, one read per chunk of runs scored by the
   same Python rules as every refresh (leaderboard.boards.scoring), so a rebuilt row is
   identical, byte for byte, to a refreshed one;
4. the board version of every problem set.

Other databases (SQLite in development and CI) take board_rescoring.rebuild_all. `verify_sample` compares a
sample of runs (scores, review state, counts) with the reference computation, so the check of a
13 M-kernel rebuild takes seconds, not the time of a second rebuild."""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Callable, Iterable
from itertools import chain, repeat

from django.db import connection, transaction
from django.db.models import Count, OuterRef, Q, Subquery
from django.db.models.functions import Coalesce
from django.utils import timezone

from evaluation.results.metrics import pass_at_k
from leaderboard.boards import rescoring as board_rescoring
from leaderboard.boards import stored as board_stored
from leaderboard.boards.scoring import Tally
from leaderboard.models import (
    DirtyProblem,
    DirtyRun,
    Evaluation,
    Kernel,
    KernelQuerySet,
    KernelReport,
    Origin,
    ProblemStats,
    Review,
    Run,
    RunScore,
)
from problems.models import Problem

CHUNK = 1_000  # runs scored per read (about 260,000 kernels)

# The reference rules' state (board_stored.kernel_rows) in SQL: the subquery's columns are
# pk, verdict, pending, excluded, flagged, reported_at, evaluated_at, created_at, speedup, origin, published.
_NEW_STATE = {
    "review_verdict": "coalesce(s.verdict, '')",
    "review_pending": "coalesce(s.pending, false)",
    "review_excluded": "coalesce(s.excluded, false)",
    "review_flagged": "coalesce(s.flagged, false)",
    "review_queued_at": "CASE WHEN s.pending THEN coalesce(s.reported_at, s.evaluated_at, s.created_at) END",
    "latest_speedup": "s.speedup",
    "ranked_speedup": f"CASE WHEN s.origin = '{Origin.MEASURED}' OR s.speedup IS NOT NULL THEN s.speedup "
    "ELSE s.published END",
}


def rebuild(write: Callable[[str], None] = lambda _: None) -> int:
    """Re-score every run; returns how many there are."""
    if connection.vendor != "postgresql":
        return board_rescoring.rebuild_all(write)
    with transaction.atomic():
        with connection.cursor() as cursor:
            # The queries run once over many rows: compiling them (JIT) cost most of their time.
            cursor.execute("SET LOCAL jit = off")
            cursor.execute("SET LOCAL work_mem = '64MB'")  # a chunk's sorts in memory
        # Lock every run, as board_rescoring.refresh_runs locks its few: a re-scoring of a run that starts
        # meanwhile waits for this one to commit, instead of writing rows beside it.
        ids = list(Run.objects.select_for_update().order_by("pk").values_list("pk", flat=True))
        DirtyRun.objects.all().delete()  # everything is re-scored here, set-aside runs too
        DirtyProblem.objects.all().delete()
        write(f"stored review state of {store_kernel_states():,} kernels changed")
        store_run_counts()
        board_rescoring.recount_problems()
        excluding = runs_with_excluded_kernels()
        for start in range(0, len(ids), CHUNK):
            store_scores(ids[start : start + CHUNK], excluding)
            write(f"re-scored {min(start + CHUNK, len(ids))} of {len(ids)} runs")
        board_rescoring.bump_all_versions()
    return len(ids)


def store_kernel_states() -> int:
    """Every kernel's review state by the reference rules (KernelQuerySet.with_review_state; for
    the kernels never reviewed nor reported, the same rules without the subqueries that find
    nothing for them), in two UPDATEs; how many kernels' state changed."""
    reviewed = Q(pk__in=Review.objects.values("kernel_id")) | Q(pk__in=KernelReport.objects.values("kernel_id"))
    return _update_states(Kernel.objects.filter(reviewed).with_review_state()) + _update_states(
        Kernel.objects.never_reviewed_or_reported()
    )


def _update_states(kernels: KernelQuerySet) -> int:
    rules = kernels.order_by().values_list(
        "pk", "latest_verdict", "needs_review", "is_excluded", "is_flagged", "latest_report_at",
        "evaluated_at", "created_at", "latest_evaluation__speedup", "latest_evaluation__origin", "published_speedup",
    )  # fmt: skip
    sql, params = rules.query.sql_with_params()
    columns = ", ".join(_NEW_STATE)
    new = ", ".join(_NEW_STATE.values())
    table = Kernel._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {table} SET ({columns}) = ({new}) FROM ({sql}) AS s(pk, verdict, pending, excluded, flagged, "
            f"reported_at, evaluated_at, created_at, speedup, origin, published) "
            f"WHERE {table}.id = s.pk AND ({columns}) IS DISTINCT FROM ({new})",
            params,
        )
        return cursor.rowcount


def store_run_counts() -> None:
    """Every run's kernel count, in one UPDATE."""
    counts = Kernel.objects.filter(run=OuterRef("pk")).order_by().values("run").annotate(n=Count("pk")).values("n")
    Run.objects.update(n_kernels=Coalesce(Subquery(counts), 0))


def store_scores(run_ids: list[int], excluding: set[int]) -> None:
    """The RunScore rows of these runs (`excluding`: the runs with an excluded kernel): each level's
    aggregated by one query (_LEVELS_SQL), the all-levels rows merged from them, each finished where
    the reference's float arithmetic must be followed exactly (sorted speedups packed as it packs
    them, the fsum of their logs, pass@1 by evaluation.results.metrics.pass_at_k), copied in.
    No run fails to score here: PostgreSQL's check constraints keep every stored speedup finite,
    positive and under the ceiling (what board_rescoring._scores checks, for rows older than those)."""
    with connection.cursor() as cursor:
        params = {"runs": run_ids, "excluding": sorted(excluding & set(run_ids)), "measured": Origin.MEASURED}
        cursor.execute(_LEVELS_SQL, params)
        levels = cursor.fetchall()
    finished = [_finish(row) for row in levels]
    rows = finished + _with_level_pass_sums([_finish(row) for row in _all_levels(run_ids, levels)], finished)
    rows += _copies_with_excluded(rows)
    RunScore.objects.filter(run_id__in=run_ids).delete()
    _copy(_with_above_counts(rows))


def runs_with_excluded_kernels() -> set[int]:
    """Only a kernel with a review can be excluded: found through the few reviewed kernels."""
    reviewed = Kernel.objects.filter(pk__in=Review.objects.values("kernel_id"), review_excluded=True)
    return set(reviewed.values_list("run_id", flat=True))


def _json_float(column: str) -> str:
    """A float as JSON the way Python writes it: an integral one keeps its ".0" (to_jsonb alone
    writes 2.0 as 2, which reads back as an int)."""
    return (
        f"CASE WHEN {column} = trunc({column}) THEN to_jsonb(round({column}::numeric, 1)) ELSE to_jsonb({column}) END"
    )


# One row per run, level and with_excluded: scoring.level_score's rules by sets. Rows with
# with_excluded = true only for the runs `excluding` (elsewhere they equal the false ones:
# _copies_with_excluded). Per problem: its sample 0 ("z"), its counted samples (n), the correct ones
# (c), the best speedup of a correct one; speedups of correct kernels only, as _outcome gives them.
_LEVELS_SQL = f"""
WITH kernels AS (
    SELECT k.run_id, p.level, k.problem_id, k.sample_index,
           coalesce(e.correct, false) AS correct,
           coalesce(e.compiled, false) OR coalesce(e.correct, false) AS compiled,
           CASE WHEN e.correct THEN e.speedup END AS speedup,
           k.review_flagged, k.review_pending, k.review_excluded,
           coalesce(e.origin = %(measured)s, false) AS measured,
           k.published_speedup, k.published_hardware, x.run_id IS NOT NULL AS run_excludes
    FROM {Kernel._meta.db_table} k
    JOIN {Problem._meta.db_table} p ON p.id = k.problem_id
    -- By the primary key, kernel by kernel (OFFSET 0 keeps the planner from turning this into a
    -- scan of every evaluation for each chunk).
    LEFT JOIN LATERAL (
        SELECT compiled, correct, speedup, origin FROM {Evaluation._meta.db_table}
        WHERE id = k.latest_evaluation_id OFFSET 0
    ) e ON true
    LEFT JOIN unnest(%(excluding)s::bigint[]) AS x(run_id) ON x.run_id = k.run_id
    WHERE k.run_id = ANY(%(runs)s)
),
problems AS (
    SELECT run_id, level, with_excluded, problem_id,
           count(*) AS kernels,
           count(*) FILTER (WHERE review_flagged) AS flagged,
           count(*) FILTER (WHERE review_pending) AS unreviewed,
           count(*) FILTER (WHERE review_excluded) AS excluded,
           count(*) FILTER (WHERE measured) AS measured,
           bool_or(counts AND sample_index = 0) AS z,
           bool_or(counts AND sample_index = 0 AND compiled) AS z_compiled,
           bool_or(counts AND sample_index = 0 AND correct) AS z_correct,
           max(speedup) FILTER (WHERE counts AND sample_index = 0) AS z_speedup,
           count(*) FILTER (WHERE counts) AS n,
           count(*) FILTER (WHERE counts AND correct) AS c,
           bool_or(counts AND compiled) AS any_compiled,
           max(speedup) FILTER (WHERE counts) AS best,
           max(published_speedup) FILTER (WHERE counts) AS published,
           -- the last name in code point order, as scoring.problem_entry's max()
           coalesce(max(published_hardware COLLATE "C")
                    FILTER (WHERE counts AND published_speedup IS NOT NULL AND published_hardware <> ''), '')
               AS published_on
    FROM kernels
    JOIN LATERAL (VALUES (false), (true)) AS w(with_excluded)
      ON NOT w.with_excluded OR kernels.run_excludes
    CROSS JOIN LATERAL (SELECT NOT kernels.review_excluded OR w.with_excluded AS counts) AS c
    GROUP BY run_id, level, with_excluded, problem_id
)
SELECT run_id, level, with_excluded,
       sum(kernels), sum(flagged), sum(unreviewed), sum(excluded), sum(measured),
       count(*) FILTER (WHERE z), count(*) FILTER (WHERE z_compiled), count(*) FILTER (WHERE z_correct),
       count(*) FILTER (WHERE z_correct AND z_speedup IS NULL),
       array_agg(z_speedup) FILTER (WHERE z_speedup IS NOT NULL),
       count(*) FILTER (WHERE n > 0), count(*) FILTER (WHERE any_compiled), count(*) FILTER (WHERE c > 0),
       count(*) FILTER (WHERE c > 0 AND best IS NULL),
       array_agg(best) FILTER (WHERE best IS NOT NULL),
       array_agg(n) FILTER (WHERE n > 0), array_agg(c) FILTER (WHERE n > 0),
       array_agg(published) FILTER (WHERE published IS NOT NULL),
       coalesce(max(published_on COLLATE "C") FILTER (WHERE published_on <> ''), ''),
       -- each problem's entry, as scoring.problem_entry writes it
       jsonb_object_agg(problem_id, jsonb_build_array(
           CASE WHEN NOT z THEN 0 WHEN z_correct AND z_speedup IS NOT NULL THEN 3 WHEN z_correct THEN 4
                WHEN z_compiled THEN 2 ELSE 1 END,
           {_json_float("z_speedup")}, {_json_float("best")}, kernels,
           CASE WHEN n = 0 THEN 0 WHEN c > 0 AND best IS NOT NULL THEN 3 WHEN c > 0 THEN 4
                WHEN any_compiled THEN 2 ELSE 1 END,
           n, c, {_json_float("published")}, published_on, flagged, unreviewed, excluded, measured))::text
FROM problems
GROUP BY run_id, level, with_excluded
"""
_LISTS = (12, 17, 18, 19, 20)  # the columns of _LEVELS_SQL holding lists (or NULL for none)


def _all_levels(run_ids: list[int], levels: list[tuple]) -> list[tuple]:
    """Each run's all-levels rows (level 0), as _LEVELS_SQL would give them over all its kernels:
    its levels' rows added up (problems are of one level each), or nothing for a run without kernels."""
    merged: dict[tuple[int, bool], list] = {(run_id, False): _empty(run_id, False) for run_id in run_ids}
    for row in levels:
        into = merged.setdefault((row[0], row[2]), _empty(row[0], row[2]))
        for column in range(3, 21):
            into[column] = into[column] + (row[column] or []) if column in _LISTS else into[column] + row[column]
        into[21] = max(into[21], row[21])
    # The all-levels rows store no entries: they are the fold of their levels' (board_rescoring._refolded).
    return [(*row[:22], "{}") for row in merged.values()]


def _with_level_pass_sums(all_levels: list[tuple], levels: list[tuple]) -> list[tuple]:
    """The all-levels rows with pass@1's sum as scoring.merge makes it: the fsum of their levels'."""
    column = _COPY_COLUMNS.index("pass_at_1_sum")
    sums: dict[tuple[int, bool], list[float]] = {}
    for row in levels:
        sums.setdefault((row[0], row[2]), []).append(row[column])
    return [(*row[:column], math.fsum(sums.get((row[0], row[2]), ())), *row[column + 1 :]) for row in all_levels]


def _empty(run_id: int, with_excluded: bool) -> list:
    return [run_id, 0, with_excluded, *([[] if column in _LISTS else 0 for column in range(3, 21)]), ""]


_COPY_COLUMNS = (
    "run_id", "level", "with_excluded", "kernels", "flagged", "unreviewed", "excluded", "measured",
    "s0_attempted", "s0_compiled", "s0_correct", "s0_unscored", "s0_speedups", "s0_log_sum",
    "best_attempted", "best_compiled", "best_correct", "best_unscored", "best_speedups", "best_log_sum",
    "pass_at_1_sum", "pub_count", "pub_speedups", "pub_log_sum", "pub_hardware", "problems", "updated_at",
)  # fmt: skip


def _finish(row: tuple) -> tuple:
    """A row of _LEVELS_SQL as the row of _COPY_COLUMNS the reference would store."""
    run_id, level, with_excluded, kernels, flagged, unreviewed, excluded, measured, *rest = row
    s0_counts, s0_values, best_counts, best_values = rest[0:4], rest[4], rest[5:9], rest[9]
    ns, cs, published, published_on, problems = rest[10:15]
    # level_score's fsum of each problem's pass@1, computed once per distinct (samples, correct)
    counts = Counter(zip(ns or (), cs or (), strict=True))
    pass_sum = math.fsum(chain.from_iterable(repeat(pass_at_k(n, c, 1), times) for (n, c), times in counts.items()))
    return (
        run_id, level, with_excluded, kernels, flagged, unreviewed, excluded, measured,
        *s0_counts, *_packed(s0_values), *best_counts, *_packed(best_values), pass_sum,
        len(published or ()), *_packed(published), published_on, problems, timezone.now(),
    )  # fmt: skip


def _packed(values: list[float] | None) -> tuple[bytes, float]:
    """Speedups and the fsum of their logs exactly as scoring.Tally.finish stores them."""
    tally = Tally()
    tally.finish(values or ())
    return tally.speedups.tobytes(), tally.log_sum


def _copies_with_excluded(rows: list[tuple]) -> list[tuple]:
    """The with_excluded rows the query left out: equal to the without ones (no kernel excluded)."""
    present = {(row[0], row[1]) for row in rows if row[2]}
    return [(row[0], row[1], True, *row[3:]) for row in rows if not row[2] and (row[0], row[1]) not in present]


def _with_above_counts(rows: list[tuple]) -> list[tuple]:
    """Each row with the counts a board ranks by (board_stored.ABOVE_COLUMNS), from its speedups."""
    packed = [_COPY_COLUMNS.index(column) for column in ("s0_speedups", "best_speedups", "pub_speedups")]
    return [(*row, *board_stored.above_counts_packed(*(row[at] for at in packed))) for row in rows]


def _copy(rows: list[tuple]) -> None:
    table = RunScore._meta.db_table
    columns = ", ".join((*_COPY_COLUMNS, *board_stored.ABOVE_COLUMNS))
    with (
        connection.cursor() as cursor,
        cursor.cursor.copy(f"COPY {table} ({columns}) FROM STDIN") as copy,
    ):
        for row in rows:
            copy.write_row(row)


# ---------------------------------------------------------------------------------------------
# checking on a sample


def sample_runs(size: int, seed: int = 0) -> list[int]:
    """`size` runs drawn at random, and the `size` re-scored last (those the latest writes touched)."""
    ids = list(Run.objects.order_by("pk").values_list("pk", flat=True))
    drawn = random.Random(seed).sample(ids, min(size, len(ids)))
    latest = RunScore.objects.order_by("-updated_at").values_list("run_id", flat=True).distinct()[: size * 10]
    recent = list(dict.fromkeys(latest))[:size]
    return sorted(set(drawn) | set(recent))


def verify_runs(run_ids: Iterable[int], write: Callable[[str], None] = lambda _: None) -> list[str]:
    """The differences between the stored read model of these runs and the reference computation:
    their RunScore rows (board_rescoring.verify_all), their kernels' review state and their kernel counts."""
    ids = sorted(set(run_ids))
    problems = board_rescoring.verify_all(write, run_ids=ids)
    for start in range(0, len(ids), board_rescoring.BATCH):
        batch = ids[start : start + board_rescoring.BATCH]
        rows = board_stored.kernel_rows(Kernel.objects.filter(run_id__in=batch), with_stored=True)
        problems += [f"kernel {row.pk}: stored review state differs" for row in rows if row.stored != row.state]
        counts = dict(Run.objects.filter(pk__in=batch).values_list("pk", "n_kernels"))
        fresh = dict(
            Kernel.objects.filter(run_id__in=batch).values("run_id").annotate(n=Count("pk")).values_list("run_id", "n")
        )
        problems += [f"run {pk}: stored kernel count differs" for pk, n in counts.items() if n != fresh.get(pk, 0)]
    return problems


def verify_problem_counts() -> list[str]:
    """The differences between every problem's stored kernel count and a count now."""
    fresh = dict(Problem.objects.annotate(n=Count("kernels")).values_list("pk", "n"))
    stored = dict(ProblemStats.objects.values_list("problem_id", "n_kernels"))
    return [f"problem {pk}: stored kernel count differs" for pk, n in fresh.items() if stored.get(pk, 0) != n]
