"""Search (/search/) through trigram indexes on PostgreSQL: Django's icontains is
UPPER(col::text) LIKE UPPER('%text%'), which a GIN index on UPPER(col::text) gin_trgm_ops serves.
SQLite keeps its plain scan (the fallback). Where pg_trgm cannot be installed (a database user
without the right), the migration says so and leaves search unindexed."""

from django.db import migrations

INDEXES = (
    ("leaderboard_languagemodel", "name", "search_model_name_trgm"),
    ("leaderboard_lab", "name", "search_lab_name_trgm"),
    ("problems_problem", "name", "search_problem_name_trgm"),
    ("problems_problem", "tags", "search_problem_tags_trgm"),
)


def create(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    with schema_editor.connection.cursor() as cursor:
        try:
            cursor.execute("SAVEPOINT trgm")
            cursor.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
            cursor.execute("RELEASE SAVEPOINT trgm")
        except Exception as exc:  # no right to install extensions: search stays a scan
            cursor.execute("ROLLBACK TO SAVEPOINT trgm")
            print(f"\n  pg_trgm not available ({exc}); search stays unindexed")
            return
        for table, column, name in INDEXES:
            cursor.execute(
                f"CREATE INDEX IF NOT EXISTS {name} ON {table} USING gin ((UPPER({column}::text)) gin_trgm_ops)"
            )


def drop(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    with schema_editor.connection.cursor() as cursor:
        for _, _, name in INDEXES:
            cursor.execute(f"DROP INDEX IF EXISTS {name}")


class Migration(migrations.Migration):
    dependencies = [
        ("leaderboard", "0008_board_read_model"),
        ("problems", "0002_int_ranges"),
    ]

    operations = [migrations.RunPython(create, drop)]
