"""Many rows of one table updated in one statement, each with its own values (PostgreSQL): what the
re-scorer writes a pass with (the patched RunScore rows, the kernels' review state). Django's
`bulk_update` builds a CASE per field and row (0.6 s of Python for a hundred kernels) and one UPDATE
per distinct value costs a statement per kernel when each has its own speedup; here each column
travels as one array (`unnest`), so the statement's text does not grow with the rows."""

from __future__ import annotations

from collections.abc import Sequence

from django.db import connection
from django.db.models import Model


def update_rows(
    model: type[Model],
    names: Sequence[str],
    pks: Sequence[int],
    rows: Sequence[Sequence],
    also: str = "",
    extra: Sequence[tuple[str, list]] = (),
) -> None:
    """Set the fields `names` (attnames) of the rows `pks` to `rows` (one sequence of values a row,
    in `names`' order). `also`: more assignments for the SET clause, SQL over `r` (the row) and `v`
    (its values: `v.<column>`, and `v.extra0`, `v.extra1`... for the `extra` arrays, each given with
    its SQL type: (type, one value a row)); no parameters of its own."""
    fields = [model._meta.get_field(name) for name in names]
    columns = [field.column for field in fields]
    arrays = [[row[index] for row in rows] for index in range(len(fields))]
    unnest = ", ".join(["%s::bigint[]", *(f"%s::{field.cast_db_type(connection)}[]" for field in fields)])
    unnest += "".join(f", %s::{kind}[]" for kind, _ in extra)
    named = ", ".join(["id", *columns, *(f"extra{index}" for index in range(len(extra)))])
    assigned = ", ".join(f"{column} = v.{column}" for column in columns)
    sql = (
        f"UPDATE {model._meta.db_table} AS r SET {assigned}{', ' + also if also else ''} "
        f"FROM unnest({unnest}) AS v({named}) WHERE r.{model._meta.pk.column} = v.id"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [list(pks), *arrays, *(values for _, values in extra)])
