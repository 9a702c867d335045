"""The staff groups (Ingestors, Reviewers) as the data migrations make them, made again where a
transactional test's flush removed them (a flush re-makes permissions through post_migrate, not the
rows data migrations wrote). One helper for the suites' users (tests/conftest.py) and the live sites
(tests/integration/live_site.py)."""

from __future__ import annotations

import importlib

from django.apps import apps
from django.contrib.auth.models import Group

GROUP_MIGRATIONS = (
    ("0002_ingestors_and_reviewers_groups", "create_groups"),
    ("0004_kernelreport_reviewers", "grant_reviewers"),
)


def ensure_staff_groups() -> None:
    """Run the groups' data migrations on the live registry when a group is missing (they are
    idempotent, and put the registry back as they found it: tests/django/test_group_migrations.py)."""
    if Group.objects.filter(name__in=["Ingestors", "Reviewers"]).count() == 2:
        return
    for module, function in GROUP_MIGRATIONS:
        getattr(importlib.import_module(f"leaderboard.migrations.{module}"), function)(apps, None)
