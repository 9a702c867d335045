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


def test_a_deep_page_joins_only_its_own_rows_and_holds_what_an_offset_would():
    """Past the first page the page's keys are found first (an OFFSET over keys alone, no join) and
    only those rows are joined; the rows and their order are those of the plain slice."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    models = [LanguageModel.objects.create(name=f"m{n}", lab=None) for n in range(7)]
    ordered = LanguageModel.objects.select_related("lab").order_by("-pk")
    with CaptureQueriesContext(connection) as queries:
        page = list(CachedCountPaginator(ordered, 3).page(2).object_list)
    assert [m.pk for m in page] == [m.pk for m in ordered[3:6]] == [m.pk for m in models[3:0:-1]]
    offset = [q["sql"] for q in queries.captured_queries if "OFFSET" in q["sql"].upper()]
    assert len(offset) == 1 and "JOIN" not in offset[0].upper()
