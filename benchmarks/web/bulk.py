"""The dataset's kernels and evaluations on PostgreSQL, generated inside the database: the shape of
benchmarks/web/dataset.py (the same per-run samples, missing first samples, status mix, speedup
distribution, imported-without-baseline share and flags), drawn by `random()` after `setseed`, so
the same scale and seed give the same rows.

Why not the rows from Python: at 13 M kernels a Python loop feeding COPY spends minutes building
rows, and maintaining eight indexes and four foreign keys row by row costs more than building them
once. So, as a restore does: the kernel and evaluation tables lose their secondary indexes and
constraints, one INSERT ... SELECT per chunk of runs fills them, and the indexes and constraints
come back built (and checked) in one pass each."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from django.db import connection, transaction
from django.db.models import Model

from leaderboard.models import Evaluation, Kernel, Origin, Run
from problems.models import Problem

CHUNK_RUNS = 2_000  # runs per INSERT (about 520,000 kernels): progress lines, bounded temp tables
MISSING_FIRST = 0.04  # a problem the model gave no first sample for (dataset.py's share)


def generate(runs: list[Run], hardware_id: int, seed: int, write: Callable[[str], None]) -> None:
    """Kernels and evaluations of `runs` (already stored, ids ascending), one evaluation each."""
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL maintenance_work_mem = '1GB'")
        # Check the runs' deferred foreign keys now: a table with pending checks cannot be altered.
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
        cursor.execute("SELECT setseed(%s)", [(seed % 1000) / 1000])
        with _bare(cursor, [Kernel, Evaluation]):
            started = time.monotonic()
            for first in range(0, len(runs), CHUNK_RUNS):
                chunk = runs[first : first + CHUNK_RUNS]
                _draw(cursor, chunk[0].pk, chunk[-1].pk)
                _insert(cursor, Kernel, _kernel_columns())
                _insert(cursor, Evaluation, _evaluation_columns(hardware_id))
                done = first + len(chunk)
                write(f"kernels and evaluations: {done} of {len(runs)} runs ({time.monotonic() - started:.0f} s)")
            write("building indexes and checking constraints")
        _restart_sequences(cursor, [Kernel, Evaluation])
        cursor.execute("SET CONSTRAINTS ALL DEFERRED")


def _draw(cursor, first_run: int, last_run: int) -> None:
    """One row per kernel of these runs with its random draws, in kernel order (run, problem,
    sample): ids follow on from the table's, and each kernel's one evaluation takes its id."""
    cursor.execute("DROP TABLE IF EXISTS bench_draws")
    cursor.execute(
        f"""
        CREATE TEMP TABLE bench_draws AS
        SELECT (SELECT coalesce(max(id), 0) FROM {Kernel._meta.db_table})
                 + row_number() OVER (ORDER BY r.id, p.id, s.sample) AS id,
               r.id AS run_id, r.origin, p.id AS problem_id, s.sample,
               random() AS u_status, 1 - random() AS u_radius, random() AS u_angle,
               random() AS u_unscored, random() AS u_flag
        FROM {Run._meta.db_table} r
        JOIN {Problem._meta.db_table} p ON p.problem_set_id = r.problem_set_id
        CROSS JOIN LATERAL generate_series(
            0, CASE WHEN p.level = 1 THEN r.samples_per_problem ELSE 1 END - 1) AS s(sample)
        WHERE r.id BETWEEN %s AND %s AND (s.sample > 0 OR random() >= %s)
        ORDER BY r.id, p.id, s.sample
        """,
        [first_run, last_run, MISSING_FIRST],
    )
    cursor.execute(
        f"""
        CREATE TEMP TABLE bench_kernels AS
        SELECT d.*, s.status, CASE WHEN s.status = 'correct' AND NOT (
                   d.origin = '{Origin.IMPORTED}' AND d.u_unscored < 0.05)
                 THEN round(exp(-0.1 + 0.6 * sqrt(-2 * ln(d.u_radius)) * cos(2 * pi() * d.u_angle))::numeric, 4)::float8
               END AS speedup,
               format(E'class ModelNew:  # run %s problem %s sample %s\\n    pass\\n',
                      d.run_id, d.problem_id, d.sample) AS source
        FROM bench_draws d CROSS JOIN LATERAL (SELECT CASE
            WHEN d.u_status < 0.55 THEN 'correct' WHEN d.u_status < 0.75 THEN 'incorrect'
            WHEN d.u_status < 0.90 THEN 'compile_error' WHEN d.u_status < 0.95 THEN 'runtime_error'
            WHEN d.u_status < 0.98 THEN 'timeout' ELSE 'crashed' END AS status) s
        ORDER BY d.id
        """
    )
    cursor.execute("DROP TABLE bench_draws")
    cursor.execute("ALTER TABLE bench_kernels RENAME TO bench_draws")


def _kernel_columns() -> dict[str, str]:
    """Kernel columns computed per row (the rest take the model's defaults). The stored speedup
    columns hold what the worker's store path leaves (the rebuild recomputes them)."""
    return {
        "id": "id",
        "run_id": "run_id",
        "problem_id": "problem_id",
        "sample_index": "sample",
        "source": "source",
        "source_hash": "encode(sha256(convert_to(source, 'UTF8')), 'hex')",
        "source_bytes": "octet_length(source)",
        "backend": "'cuda'",
        "latest_evaluation_id": "id",
        "latest_speedup": "speedup",
        "ranked_speedup": "speedup",
        "created_at": "now()",
    }


def _evaluation_columns(hardware_id: int) -> dict[str, str]:
    return {
        "id": "id",
        "kernel_id": "id",
        "hardware_id": str(int(hardware_id)),
        "origin": "origin",
        "state": "'done'",
        "status": "status",
        "compiled": "status <> 'compile_error'",
        "correct": "status = 'correct'",
        "speedup": "speedup",
        "kernel_ms": "1.0",
        "reference_ms": "speedup",
        "flags": "CASE WHEN status = 'correct' AND u_flag < 0.02 THEN "
        """'[{"code": "excessive_speedup", "message": "too fast"}]'::jsonb ELSE '[]'::jsonb END""",
        "queued_at": "now()",
        "started_at": "now()",
        "finished_at": "now()",
    }


def _insert(cursor, model: type[Model], computed: dict[str, str]) -> None:
    """INSERT ... SELECT from bench_draws: `computed` columns as given, every other column the
    model's default (an unsaved instance's value, as bulk_create would store it)."""
    blank = model()
    columns, values, params = [], [], []
    for field in model._meta.concrete_fields:
        columns.append(connection.ops.quote_name(field.column))
        if field.column in computed:
            values.append(computed[field.column])
        else:
            values.append("%s")
            params.append(field.get_db_prep_save(getattr(blank, field.attname), connection))
    cursor.execute(
        f"INSERT INTO {model._meta.db_table} ({', '.join(columns)}) SELECT {', '.join(values)} FROM bench_draws",
        params,
    )


@contextmanager
def _bare(cursor, models: list[type[Model]]) -> Iterator[None]:
    """The tables without their foreign keys, unique constraints and secondary indexes for the
    block, then with them again (built in one sort each, and checked)."""
    tables = [model._meta.db_table for model in models]
    cursor.execute(
        "SELECT conrelid::regclass::text, conname, pg_get_constraintdef(oid) FROM pg_constraint "
        "WHERE conrelid = ANY(%s::regclass[]) AND contype IN ('f', 'u') ORDER BY contype DESC",
        [tables],
    )
    constraints = cursor.fetchall()  # unique constraints first: foreign keys may rest on them
    cursor.execute(
        "SELECT indexrelid::regclass::text, pg_get_indexdef(indexrelid) FROM pg_index "
        "WHERE indrelid = ANY(%s::regclass[]) AND NOT indisprimary "
        "AND indexrelid NOT IN (SELECT conindid FROM pg_constraint)",
        [tables],
    )
    indexes = cursor.fetchall()
    for table, name, _ in reversed(constraints):
        cursor.execute(f"ALTER TABLE {table} DROP CONSTRAINT {connection.ops.quote_name(name)}")
    for name, _ in indexes:
        cursor.execute(f"DROP INDEX {name}")
    yield
    for _, definition in indexes:
        cursor.execute(definition)
    for table, name, definition in constraints:
        cursor.execute(f"ALTER TABLE {table} ADD CONSTRAINT {connection.ops.quote_name(name)} {definition}")


def _restart_sequences(cursor, models: list[type[Model]]) -> None:
    """The id sequences after the explicit ids, so the site's own inserts follow on."""
    for model in models:
        table = model._meta.db_table
        cursor.execute(
            f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), coalesce(max(id), 0) + 1, false) FROM {table}"
        )
