"""Issue 19 (cases 6 and 8) and issue 20 (case 3): who may write into any run, who asked for an
evaluation and how many source bytes a kernel holds (the per-user quotas), and at most one pending
evaluation per kernel and hardware. Duplicates already pending are ended as failed first (the
oldest, or the running one, is kept), so the unique index can be built."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

PENDING = ["queued", "running"]


def end_duplicate_pending(apps, schema_editor) -> None:
    Evaluation = apps.get_model("leaderboard", "Evaluation")
    kept: dict[tuple[int, int], int] = {}
    pending = Evaluation.objects.filter(state__in=PENDING).order_by("-state", "queued_at", "pk")  # running first
    for pk, kernel_id, hardware_id in pending.values_list("pk", "kernel_id", "hardware_id").iterator():
        keep = kept.setdefault((kernel_id, hardware_id), pk)
        if keep != pk:
            Evaluation.objects.filter(pk=pk).update(
                state="failed", failure_reason=f"a duplicate of evaluation {keep}: one pending per kernel and hardware"
            )


def count_source_bytes(apps, schema_editor) -> None:
    table = apps.get_model("leaderboard", "Kernel")._meta.db_table
    size = "octet_length(source)" if schema_editor.connection.vendor == "postgresql" else "length(CAST(source AS BLOB))"
    schema_editor.execute(f"UPDATE {table} SET source_bytes = {size}")


class Migration(migrations.Migration):
    dependencies = [
        ("leaderboard", "0014_published_figures"),
        ("problems", "0003_scoring_rules"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AlterModelOptions(
            name="run",
            options={
                "ordering": ["-created_at"],
                "permissions": [("write_any_run", "Can import into, add kernels to and verify any run")],
            },
        ),
        migrations.AddField(
            model_name="evaluation",
            name="requested_by",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="+",
                to=settings.AUTH_USER_MODEL,
            ),
        ),
        migrations.AddField(
            model_name="kernel",
            name="source_bytes",
            field=models.PositiveIntegerField(default=0, editable=False),
        ),
        migrations.RunPython(count_source_bytes, migrations.RunPython.noop),
        migrations.AddIndex(
            model_name="evaluation",
            index=models.Index(
                condition=models.Q(("state__in", PENDING)), fields=["requested_by"], name="evaluation_pending_user_idx"
            ),
        ),
        migrations.RunPython(end_duplicate_pending, migrations.RunPython.noop),
        migrations.AddConstraint(
            model_name="evaluation",
            constraint=models.UniqueConstraint(
                condition=models.Q(("state__in", PENDING)), fields=("kernel", "hardware"), name="evaluation_one_pending"
            ),
        ),
    ]
