"""The level rows' entries (RunScore.problems, about 5.7 kB of JSON a row, 1.3 kB compressed) are
rewritten by every re-scoring of a result: on PostgreSQL compress them with lz4, not the default
pglz. Rewriting 200 rows' entries took 49-80 ms with pglz and 20-23 ms with lz4 on a 1.3 M database
(docs/performance.md). Only values written from now on change; old ones stay readable as they are.
A server built without lz4 keeps pglz (the statement is skipped with a notice)."""

from django.db import migrations

LZ4 = """
DO $$
BEGIN
    ALTER TABLE leaderboard_runscore ALTER COLUMN problems SET COMPRESSION lz4;
EXCEPTION WHEN feature_not_supported OR invalid_parameter_value THEN
    RAISE NOTICE 'lz4 not available: RunScore.problems stays compressed with pglz';
END
$$;
"""
PGLZ = "ALTER TABLE leaderboard_runscore ALTER COLUMN problems SET COMPRESSION pglz;"


def forwards(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(LZ4)


def backwards(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(PGLZ)


class Migration(migrations.Migration):
    dependencies = [
        ("leaderboard", "0033_review_queue_speedup_indexes"),
    ]

    operations = [migrations.RunPython(forwards, backwards)]
