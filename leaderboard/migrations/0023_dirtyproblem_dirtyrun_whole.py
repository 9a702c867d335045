from django.db import migrations, models
from django.utils import timezone


def mark_every_run(apps, schema_editor):
    """RunScore.problems entries gain the fields the incremental re-scoring folds from: every run is
    marked whole, so the re-scorer (or the next read) rewrites its rows in the new form."""
    Run = apps.get_model("leaderboard", "Run")
    DirtyRun = apps.get_model("leaderboard", "DirtyRun")
    now = timezone.now()
    ids = list(Run.objects.values_list("pk", flat=True))
    for start in range(0, len(ids), 5000):
        DirtyRun.objects.bulk_create(
            [DirtyRun(run_id=pk, last_marked_at=now, whole=True) for pk in ids[start : start + 5000]],
            ignore_conflicts=True,
        )
    DirtyRun.objects.update(whole=True)


class Migration(migrations.Migration):
    dependencies = [
        ("leaderboard", "0022_dirtyrun_last_marked_at"),
    ]

    operations = [
        migrations.AddField(
            model_name="dirtyrun",
            name="whole",
            field=models.BooleanField(default=True),
        ),
        migrations.CreateModel(
            name="DirtyProblem",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("run_id", models.BigIntegerField()),
                ("problem_id", models.BigIntegerField()),
                ("last_marked_at", models.DateTimeField()),
            ],
            options={
                "constraints": [models.UniqueConstraint(fields=("run_id", "problem_id"), name="dirtyproblem_unique")],
            },
        ),
        migrations.RunPython(mark_every_run, migrations.RunPython.noop),
    ]
