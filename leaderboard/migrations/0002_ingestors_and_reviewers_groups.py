"""Groups for the two kinds of staff: Ingestors (add scores, posts, runs, kernels, evaluations) and
Reviewers (record verdicts on kernels, see everything)."""

from django.db import migrations

INGESTOR_PERMS = [
    f"{action}_{model}"
    for model in ("reportedscore", "launchpost", "run", "kernel", "evaluation")
    for action in ("add", "change")
]
VIEWABLE = {
    "leaderboard": ["lab", "languagemodel", "run", "kernel", "evaluation", "reportedscore", "launchpost", "review"],
    "problems": ["problemset", "problem", "hardware", "baseline"],
}


def _ensure_permissions(apps) -> None:
    # Permissions are made by post_migrate, after every migration: make them now on a fresh database.
    from django.contrib.auth.management import create_permissions

    for label in ("leaderboard", "problems"):
        app_config = apps.get_app_config(label)
        # A historical app config has no models module, and create_permissions skips those. Put
        # back what was there: called with the live registry (tests/conftest.py), a None left here
        # would make every later post_migrate skip the app's permissions.
        previous = getattr(app_config, "models_module", None)  # an AppConfigStub has none
        app_config.models_module = previous or True
        try:
            create_permissions(app_config, apps=apps, verbosity=0)
        finally:
            app_config.models_module = previous


def create_groups(apps, schema_editor) -> None:
    _ensure_permissions(apps)
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    ingestors, _ = Group.objects.get_or_create(name="Ingestors")
    ingestors.permissions.add(
        *Permission.objects.filter(content_type__app_label="leaderboard", codename__in=INGESTOR_PERMS)
    )
    reviewers, _ = Group.objects.get_or_create(name="Reviewers")
    view = [
        perm
        for app_label, models in VIEWABLE.items()
        for perm in Permission.objects.filter(
            content_type__app_label=app_label, codename__in=[f"view_{model}" for model in models]
        )
    ]
    reviewers.permissions.add(
        *view, *Permission.objects.filter(content_type__app_label="leaderboard", codename="add_review")
    )


def delete_groups(apps, schema_editor) -> None:
    apps.get_model("auth", "Group").objects.filter(name__in=["Ingestors", "Reviewers"]).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
        ("leaderboard", "0001_initial"),
        ("problems", "0001_initial"),
    ]

    operations = [migrations.RunPython(create_groups, delete_groups)]
