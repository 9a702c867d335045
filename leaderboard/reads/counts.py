"""List counts that do not scan a million rows on every page: the count of a list's query is
cached for COUNT_SECONDS (a list a few seconds behind on its total is fine; its rows are live)."""

from __future__ import annotations

import hashlib
from typing import Any

from django.core.cache import cache
from django.core.paginator import Page, Paginator
from django.utils.functional import cached_property

COUNT_SECONDS = 60


class CachedCountPaginator(Paginator):
    """A Paginator whose count comes from the cache when the same query was counted recently. A page
    holds its rows as they are now: Django's Paginator cuts the last page at the count, which would
    hide the rows added since the count was taken."""

    def page(self, number: Any) -> Page:
        number = self.validate_number(number)
        bottom = (number - 1) * self.per_page
        return self._get_page(self.object_list[bottom : bottom + self.per_page], number, self)

    @cached_property
    def count(self) -> int:
        query = getattr(self.object_list, "query", None)
        if query is None:
            return super().count
        key = "list-count:" + hashlib.sha256(str(query).encode()).hexdigest()[:32]
        count = cache.get(key)
        if count is None:
            count = super().count
            cache.set(key, count, COUNT_SECONDS)
        return count
