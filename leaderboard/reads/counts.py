"""List counts that do not scan a million rows on every page: the count of a list's query is
cached for COUNT_SECONDS (a list a few seconds behind on its total is fine; its rows are live)."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

from django.core.cache import cache
from django.core.paginator import Page, Paginator
from django.db.models import QuerySet
from django.utils.functional import cached_property

COUNT_SECONDS = 60


class CachedCountPaginator(Paginator):
    """A Paginator whose count comes from the cache when the same query was counted recently. A page
    holds its rows as they are now: Django's Paginator cuts the last page at the count, which would
    hide the rows added since the count was taken.

    `count_key`: what names the counted rows, where the caller knows it (the review queue: its
    filters); without it the query's SQL, which costs a compilation of the whole query (about 4 ms
    for the queue's, whose review rules are long).

    `values`: the page's rows as QuerySet.values() of these names, not model instances; the count
    stays over the query as given, since values() across relations joins them, and a count over
    those joins (a million evaluations joined to their kernels) would cost far more than the rows."""

    def __init__(self, *args: Any, count_key: str = "", values: Sequence[str] = (), **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.count_key = count_key
        self.values = tuple(values)

    def page(self, number: Any) -> Page:
        number = self.validate_number(number)
        bottom = (number - 1) * self.per_page
        return self._get_page(self._rows(bottom, bottom + self.per_page), number, self)

    def _rows(self, bottom: int, top: int) -> Any:
        """The rows from `bottom` to `top`. Past the first page of a query, the page's keys are found
        first and only its rows joined: an OFFSET over the joined query makes the database join
        every row it skips (page 100 of the kernels: 5,000 rows joined to show 50)."""
        rows = self.object_list
        if not bottom or not isinstance(rows, QuerySet) or rows.query.is_sliced or rows.query.combinator:
            return self._as_values(rows)[bottom:top]
        keys = list(rows.values_list("pk", flat=True)[bottom:top])
        return self._as_values(rows.filter(pk__in=keys))

    def _as_values(self, rows: Any) -> Any:
        return rows.values(*self.values) if self.values else rows

    @cached_property
    def count(self) -> int:
        query = getattr(self.object_list, "query", None)
        if query is None:
            return super().count
        key = "list-count:" + hashlib.sha256((self.count_key or str(query)).encode()).hexdigest()[:32]
        count = cache.get(key)
        if count is None:
            count = super().count
            cache.set(key, count, COUNT_SECONDS)
        return count
