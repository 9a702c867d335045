"""The re-scorer's fast path for runs marked by problem (leaderboard/boards/rescoring.py, the one
writer of the stored rows, calls it): a run's stored rows patched by the difference between the old
and the new entries of the problems that changed, never folded again from all their entries.

A result changes one problem of a run. Folding the run's level again (`scoring.fold`) read and
decoded every entry of the level's two rows and wrote both back whole, with the two all-levels rows
(delete and insert: about 17-25 ms a run at 1.3 M, most of a pass). A patch reads, of each row of
the run, only its aggregate columns (counts, sorted speedups, sums), and of the changed levels' rows
the old entries of the changed problems and what the level's other entries give the two parts of a
fold that no difference can move (pass@1's fsum, the published hardware's max: `scoring.Rest`),
aggregated by the database; it moves the counts by the difference, takes each old speedup out of the
sorted speedups and puts the new one in (`scoring.patch`), merges all levels again from the levels'
aggregates (`scoring.merge`, as the fold does), and writes every
patched row of a pass in one UPDATE that replaces only the changed entries in place. What it stores
is, to the bit, what the fold stores (tests/django/test_board_incremental.py holds them equal).

A run it cannot patch (a level's rows missing or about to go, an entry of an older form, a stored
speedup not where its entry says) is left to the fold, untouched (`patch_runs` returns it)."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from django.db import connection
from django.utils import timezone

from leaderboard.boards import bulk, scoring
from leaderboard.boards.scoring import LevelScore, Rest
from leaderboard.boards.stored import ALL_LEVELS, SCORE_FIELDS, columns, from_values
from leaderboard.models import RunScore

#: A changed problem's new entries (without, with the kernels reviewers excluded), or None: it has
#: no kernel left in the run.
Pair = tuple[list, list] | None

# The columns a patch writes: every stored column but the row's key, its entries and its time.
_KEY_COLUMNS = ("id", "run_id", "level", "with_excluded", "problems", "updated_at")
_COLUMNS = [field for field in RunScore._meta.concrete_fields if field.attname not in _KEY_COLUMNS]


@dataclass(frozen=True)
class Stored:
    """One stored row as a patch reads it: its aggregate (entries unread), and, for a row of a
    changed level, the old entries of the changed problems and the Rest of its entries."""

    pk: int
    run_id: int
    level: int
    with_excluded: bool
    score: LevelScore
    old: dict[int, list] | None = None
    rest: Rest | None = None
    odd: int = 0  # entries of an older form among the rest
    bare: bool = True  # an all-levels row without entries (they are its levels'; an older form had them)


@dataclass(frozen=True)
class Patched:
    """A row to write: its new aggregate, the entries it takes (problem id: entry) and drops."""

    row: Stored
    score: LevelScore
    entries: dict[int, list]
    gone: list[int]


def patch_runs(changed: dict[int, dict[int, Pair]], levels: dict[int, int]) -> dict[int, Counter]:
    """Patch the stored rows of these runs ({run id: {problem id: its new Pair}}; `levels`: each
    problem's level) in the current transaction, which holds the runs' locks. {run id: its changed
    problems' kernels as stored before} of the runs patched (their kernel counts move by the
    difference); the others are left untouched, for the fold."""
    if not changed:
        return {}
    rows = _read(changed, levels)
    writes: list[Patched] = []
    kernels_before: dict[int, Counter] = {}
    for run_id, pairs in changed.items():
        try:
            patched = _patched_run(rows.get(run_id, []), pairs, levels)
        except ValueError:  # a speedup the stored row lacks: not the fold of its entries, so fold it
            patched = None
        if patched is None:
            continue
        writes += [write for write in patched if _differs(write)]
        kernels_before[run_id] = Counter(
            {
                pid: entry[scoring.KERNELS]
                for row in rows[run_id]
                if row.with_excluded
                for pid, entry in (row.old or {}).items()
            }
        )
    if writes:
        (_write_postgres if connection.vendor == "postgresql" else _write_each)(writes)
    return kernels_before


def _patched_run(rows: list[Stored], pairs: dict[int, Pair], levels: dict[int, int]) -> list[Patched] | None:
    """A run's rows to write once `pairs` replace their problems' entries, or None when the run's
    rows cannot take a patch (the fold then makes them)."""
    by_key = {(row.level, row.with_excluded): row for row in rows}
    changed_levels = {levels[pid] for pid in pairs}
    needed = [(level, we) for level in (ALL_LEVELS, *changed_levels) for we in (False, True)]
    if any(key not in by_key for key in needed) or any((level, not we) not in by_key for level, we in by_key):
        return None  # a level new to the run, or rows missing: the fold makes them
    if not all(row.bare for row in rows):
        return None  # all levels' rows in an older form: the whole re-scoring mends them
    scores = {key: row.score for key, row in by_key.items()}
    out = []
    for level in sorted(changed_levels):
        pids = sorted(pid for pid in pairs if levels[pid] == level)
        for we in (False, True):
            row = by_key[(level, we)]
            if (
                row.rest is None
                or row.old is None
                or row.odd
                or any(len(e) != scoring.ENTRY_LENGTH for e in row.old.values())
            ):
                return None
            entries = {pid: pairs[pid][we] for pid in pids if pairs[pid] is not None}
            if row.rest.entries + len(entries) == 0:
                return None  # the level's rows go: the fold removes them
            old = [row.old[pid] for pid in pids if pid in row.old]
            scores[(level, we)] = scoring.patch(row.score, old, list(entries.values()), row.rest)
            gone = [pid for pid in pids if pairs[pid] is None and pid in row.old]
            out.append(Patched(row, scores[(level, we)], entries, gone))
    for we in (False, True):  # all levels: merged again from the levels' aggregates, as the fold does
        of_levels = [score for (level, w), score in sorted(scores.items()) if w == we and level != ALL_LEVELS]
        out.append(Patched(by_key[(ALL_LEVELS, we)], scoring.merge(of_levels), {}, []))
    return out


def _differs(write: Patched) -> bool:
    """Whether a patch changes its row (a result that leaves its problem as it was writes nothing)."""
    old = write.row.old or {}
    return (
        bool(write.gone)
        or any(old.get(pid) != entry for pid, entry in write.entries.items())
        or columns(write.score) != columns(write.row.score)
    )


def _values(write: Patched) -> list:
    """The columns a patch writes, as the fold writes them (`stored.columns`), in _COLUMNS' order."""
    values = columns(write.score)
    return [values[field.attname] for field in _COLUMNS]


# --- reading -----------------------------------------------------------------------------


def _read(changed: dict[int, dict[int, Pair]], levels: dict[int, int]) -> dict[int, list[Stored]]:
    """{run id: its stored rows} of the changed runs."""
    wanted = {(run_id, levels[pid], pid) for run_id, pairs in changed.items() for pid in pairs}
    rows = _read_postgres(wanted) if connection.vendor == "postgresql" else _read_each(changed, wanted)
    by_run: dict[int, list[Stored]] = {}
    for row in rows:
        by_run.setdefault(row.run_id, []).append(row)
    return by_run


# Of a changed level's row: the old entries of the changed problems, how many other entries it has
# (and of an older form), their last published hardware (code point order, as scoring.fold's max),
# and their (samples, correct samples) pairs, counted: aggregated here, so that no entry but the
# changed ones leaves the database.
_READ_SQL = """
WITH wanted AS (
    SELECT w.run_id, w.level, array_agg(w.pid) AS pids
    FROM unnest(%s::integer[], %s::integer[], %s::text[]) AS w(run_id, level, pid)
    GROUP BY w.run_id, w.level
)
SELECT r.id, r.with_excluded, {fields}, r.level <> 0 OR r.problems = '{{}}'::jsonb, a.old, a.n, a.odd,
       a.published_on, p.pairs
FROM leaderboard_runscore AS r
LEFT JOIN wanted AS w ON w.run_id = r.run_id AND w.level = r.level
LEFT JOIN LATERAL (
    SELECT jsonb_object_agg(e.key, e.value) FILTER (WHERE e.key = ANY (w.pids)) AS old,
           count(*) FILTER (WHERE NOT e.key = ANY (w.pids)) AS n,
           count(*) FILTER (WHERE NOT e.key = ANY (w.pids) AND jsonb_array_length(e.value) <> {length}) AS odd,
           max((e.value ->> {on}) COLLATE "C")
               FILTER (WHERE NOT e.key = ANY (w.pids) AND e.value -> {published} <> 'null'::jsonb) AS published_on
    FROM jsonb_each(r.problems) AS e
    WHERE w.pids IS NOT NULL
) AS a ON true
LEFT JOIN LATERAL (
    SELECT jsonb_agg(jsonb_build_array(g.samples, g.correct, g.n)) AS pairs
    FROM (
        SELECT e.value -> {samples} AS samples, e.value -> {correct} AS correct, count(*) AS n
        FROM jsonb_each(r.problems) AS e
        WHERE w.pids IS NOT NULL AND NOT e.key = ANY (w.pids) AND (e.value ->> {samples})::integer > 0
        GROUP BY 1, 2
    ) AS g
) AS p ON true
WHERE r.run_id = ANY (%s::integer[])
""".format(
    fields=", ".join(f"r.{name}" for name in SCORE_FIELDS),
    length=scoring.ENTRY_LENGTH,
    on=scoring.PUBLISHED_ON,
    published=scoring.PUBLISHED,
    samples=scoring.SAMPLES,
    correct=scoring.CORRECT,
)


def _read_postgres(wanted: set[tuple[int, int, int]]) -> list[Stored]:
    """Every row of the wanted runs in one query; the changed levels' entries aggregated in it."""
    ordered = sorted(wanted)
    params = [[w[0] for w in ordered], [w[1] for w in ordered], [str(w[2]) for w in ordered]]
    with connection.cursor() as cursor:
        cursor.execute(_READ_SQL, [*params, sorted({w[0] for w in ordered})])
        rows = cursor.fetchall()
    result = []
    width = len(SCORE_FIELDS)
    for pk, with_excluded, *values in rows:
        run_id, level, rest = values[0], values[1], values[2:width]
        bare, old, n, odd, published_on, pairs = values[width:]
        stored = Stored(pk, run_id, level, with_excluded, from_values(tuple(rest)), bare=bare)
        if n is not None:  # a row of a changed level
            old = _json(old) or {}
            counted = Counter({(s, c): k for s, c, k in _json(pairs) or []})
            stored = Stored(
                pk, run_id, level, with_excluded, stored.score, {int(pid): entry for pid, entry in old.items()},
                Rest(n, counted, published_on or ""), odd, bare,
            )  # fmt: skip
        result.append(stored)
    return result


def _json(value):
    return json.loads(value) if isinstance(value, str | bytes) else value


def _read_each(changed: dict[int, dict[int, Pair]], wanted: set[tuple[int, int, int]]) -> list[Stored]:
    """What `_read_postgres` reads, where the database has no JSON aggregates of its own (SQLite:
    development and tests): the rows with their entries, the same Rest made here."""
    pids_of: dict[tuple[int, int], set[int]] = {}
    for run_id, level, pid in wanted:
        pids_of.setdefault((run_id, level), set()).add(pid)
    rows = RunScore.objects.filter(run_id__in=list(changed)).values_list(
        "id", "with_excluded", *SCORE_FIELDS, "problems"
    )
    result = []
    for pk, with_excluded, run_id, level, *values in rows:
        problems = values.pop()
        score = from_values(tuple(values))
        pids = pids_of.get((run_id, level))
        if pids is None:
            result.append(Stored(pk, run_id, level, with_excluded, score, bare=level != ALL_LEVELS or not problems))
            continue
        entries = {int(pid): entry for pid, entry in problems.items()}
        others = [entry for pid, entry in entries.items() if pid not in pids]
        odd = sum(len(entry) != scoring.ENTRY_LENGTH for entry in others)
        rest = scoring.rest_of(others) if not odd else Rest(len(others), Counter(), "")
        old = {pid: entries[pid] for pid in pids if pid in entries}
        result.append(Stored(pk, run_id, level, with_excluded, score, old, rest, odd))
    return result


# --- writing -----------------------------------------------------------------------------


def _write_postgres(writes: list[Patched]) -> None:
    """Every patched row in one UPDATE, the changed entries replaced in place."""
    now = timezone.now()
    names = [*(field.attname for field in _COLUMNS), "updated_at"]
    gone = [json.dumps([str(pid) for pid in write.gone]) for write in writes]
    entries = [json.dumps({str(pid): entry for pid, entry in write.entries.items()}) for write in writes]
    bulk.update_rows(
        RunScore, names, [write.row.pk for write in writes], [[*_values(write), now] for write in writes],
        also="problems = (r.problems - ARRAY(SELECT jsonb_array_elements_text(v.extra0))) || v.extra1",
        extra=[("jsonb", gone), ("jsonb", entries)],
    )  # fmt: skip


def _write_each(writes: Iterable[Patched]) -> None:
    """Row by row, with the entries replaced here (SQLite)."""
    for write in writes:
        row = RunScore.objects.get(pk=write.row.pk)
        problems = {pid: entry for pid, entry in row.problems.items() if int(pid) not in write.gone}
        problems.update({str(pid): entry for pid, entry in write.entries.items()})
        RunScore.objects.filter(pk=write.row.pk).update(
            **columns(write.score), problems=problems, updated_at=timezone.now()
        )
