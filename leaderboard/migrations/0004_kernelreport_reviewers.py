"""Visitors' kernel reports, and the Reviewers group's permissions for the review workflow.

The group comes from 0002 (get_or_create here too, so the two can never disagree): reviewers add
reviews and view every kernel report; they change nothing else.
"""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

REVIEWER_PERMS = ["add_review", "view_review", "view_kernelreport", "view_kernel", "view_evaluation", "view_run"]


def grant_reviewers(apps, schema_editor) -> None:
    # Permissions are made by post_migrate, after every migration: make them now on a fresh database.
    from django.contrib.auth.management import create_permissions

    app_config = apps.get_app_config("leaderboard")
    previous = getattr(app_config, "models_module", None)  # put back, as in 0002 (the live registry may be passed)
    app_config.models_module = previous or True
    try:
        create_permissions(app_config, apps=apps, verbosity=0)
    finally:
        app_config.models_module = previous
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    reviewers, _ = Group.objects.get_or_create(name="Reviewers")
    reviewers.permissions.add(
        *Permission.objects.filter(content_type__app_label="leaderboard", codename__in=REVIEWER_PERMS)
    )


def revoke_reviewers(apps, schema_editor) -> None:
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    for group in Group.objects.filter(name="Reviewers"):
        group.permissions.remove(
            *Permission.objects.filter(content_type__app_label="leaderboard", codename="view_kernelreport")
        )


class Migration(migrations.Migration):
    dependencies = [
        ("leaderboard", "0003_evaluation_heartbeat_at"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="KernelReport",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("reason", models.TextField(max_length=2000)),
                ("created_at", models.DateTimeField(auto_now_add=True)),
                (
                    "kernel",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="reports", to="leaderboard.kernel"
                    ),
                ),
                (
                    "reporter",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="kernel_reports",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
            ],
            options={
                "ordering": ["-created_at"],
                "indexes": [models.Index(fields=["kernel", "-created_at"], name="kernelreport_kernel_idx")],
            },
        ),
        migrations.RunPython(grant_reviewers, revoke_reviewers),
    ]
