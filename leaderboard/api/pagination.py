"""The API's pages: ?page=N and ?page_size=N (at most settings.API_MAX_PAGE_SIZE; larger asks get
the maximum), PAGE_SIZE by default, on every list (CachedCountPagination too)."""

from __future__ import annotations

from django.conf import settings
from rest_framework.pagination import PageNumberPagination

from leaderboard.reads.counts import CachedCountPaginator


class BoundedPageNumberPagination(PageNumberPagination):
    page_size_query_param = "page_size"

    @property
    def max_page_size(self) -> int:  # read at request time, so tests and deployments can change it
        return settings.API_MAX_PAGE_SIZE


class CachedCountPagination(BoundedPageNumberPagination):
    """The same pages over CachedCountPaginator (for tables of a million rows: the total is cached)."""

    django_paginator_class = CachedCountPaginator
