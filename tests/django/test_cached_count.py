"""Lists whose total is counted once a minute (leaderboard/reads/counts.py): the count may lag,
the rows never do."""

from __future__ import annotations

import pytest
from django.core.cache import cache

from leaderboard.models import LanguageModel
from leaderboard.reads.counts import CachedCountPaginator

pytestmark = pytest.mark.django_db


def test_a_page_shows_the_rows_added_since_the_count_was_cached():
    cache.clear()
    for n in range(3):
        LanguageModel.objects.create(name=f"m{n}")
    models = LanguageModel.objects.order_by("pk")
    assert CachedCountPaginator(models, 10).get_page(1).paginator.count == 3
    for n in range(5):
        LanguageModel.objects.create(name=f"n{n}")
    page = CachedCountPaginator(models, 10).get_page(1)
    assert page.paginator.count == 3  # the total as counted a moment ago
    assert len(page.object_list) == 8  # the rows as they are
