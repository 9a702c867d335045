"""The groups' data migrations run again on the live app registry (tests/conftest.py does so after a
transactional test's flush removed the groups) must leave the registry as they found it: a models
module set to None there made every later post_migrate skip the app's permissions, so every user
given a permission after the next flush was refused (HTTP 403 in the live-server tests)."""

from __future__ import annotations

import importlib

import pytest
from django.apps import apps
from django.contrib.auth.models import Group

from tests.groups import GROUP_MIGRATIONS


@pytest.mark.django_db
@pytest.mark.parametrize("module, function", GROUP_MIGRATIONS)
def test_the_groups_migrations_leave_the_live_registry_as_it_was(module, function):
    before = {label: apps.get_app_config(label).models_module for label in ("leaderboard", "problems")}
    getattr(importlib.import_module(f"leaderboard.migrations.{module}"), function)(apps, None)
    after = {label: apps.get_app_config(label).models_module for label in ("leaderboard", "problems")}
    assert after == before and all(after.values())
    assert Group.objects.get(name="Reviewers").permissions.filter(codename="add_review").exists()
