"""Every model of the project's apps has an admin (the read model's are read-only)."""

import pytest
from django.apps import apps
from django.contrib import admin

from leaderboard.models import RunScore


@pytest.mark.parametrize("label", ["leaderboard", "problems"])
def test_every_model_has_an_admin(label):
    missing = [model.__name__ for model in apps.get_app_config(label).get_models() if model not in admin.site._registry]
    assert missing == []


def test_the_read_model_is_read_only_in_the_admin(admin_client):
    assert admin_client.get("/admin/leaderboard/runscore/").status_code == 200
    assert admin_client.get("/admin/leaderboard/runscore/add/").status_code == 403
    assert not admin.site._registry[RunScore].has_change_permission(None)


@pytest.mark.parametrize("label", ["leaderboard", "problems"])
def test_plural_names_are_words(label):
    # Issue 30: the admin said "Problem statss" (Django adds an s to any verbose_name).
    doubled = [
        m.__name__ for m in apps.get_app_config(label).get_models() if m._meta.verbose_name_plural.endswith("ss")
    ]
    assert doubled == []
