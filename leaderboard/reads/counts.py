"""List counts that do not scan a million rows on every page: the count of a list's query is
cached for COUNT_SECONDS (a list a few seconds behind on its total is fine; its rows are live)."""

from __future__ import annotations

import hashlib

from django.core.cache import cache
from django.core.paginator import Paginator
from django.utils.functional import cached_property

COUNT_SECONDS = 60


class CachedCountPaginator(Paginator):
    """A Paginator whose count comes from the cache when the same query was counted recently."""

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
