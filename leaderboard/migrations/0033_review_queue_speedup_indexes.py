"""The review queue sorted by speedup, either way: its first page read off a partial index instead of
sorted from every waiting kernel (at 13 M, 196,480 of them: 3-5 s). PostgreSQL only: the sort puts
kernels without a speedup last, and SQLite cannot say NULLS LAST in an index (its databases are the
small ones of development and tests)."""

from django.db import migrations

INDEXES = {
    "kernel_queue_fastest_idx": "latest_speedup DESC NULLS LAST, id DESC",
    "kernel_queue_slowest_idx": "latest_speedup ASC NULLS LAST, id DESC",
}


def create(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    for name, columns in INDEXES.items():
        schema_editor.execute(
            f"CREATE INDEX IF NOT EXISTS {name} ON leaderboard_kernel ({columns}) WHERE review_pending"
        )


def drop(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    for name in INDEXES:
        schema_editor.execute(f"DROP INDEX IF EXISTS {name}")


class Migration(migrations.Migration):
    dependencies = [("leaderboard", "0032_run_model_newest_index")]

    operations = [migrations.RunPython(create, drop)]
