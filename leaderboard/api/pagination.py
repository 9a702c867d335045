"""The API's pages: ?page=N and ?page_size=N (at most settings.API_MAX_PAGE_SIZE; larger asks get
the maximum), PAGE_SIZE by default, on every list (CachedCountPagination too)."""

from __future__ import annotations

from collections.abc import Sequence

from django.conf import settings
from django.db.models import QuerySet
from rest_framework.pagination import PageNumberPagination
from rest_framework.request import Request
from rest_framework.views import APIView

from leaderboard.reads.counts import CachedCountPaginator


class BoundedPageNumberPagination(PageNumberPagination):
    page_size_query_param = "page_size"

    @property
    def max_page_size(self) -> int:  # read at request time, so tests and deployments can change it
        return settings.API_MAX_PAGE_SIZE


class CachedCountPagination(BoundedPageNumberPagination):
    """The same pages over CachedCountPaginator (for tables of a million rows: the total is cached).

    The total is cached under the list's path and its query's parameters but the page's own: a list
    so paged reads only what its parameters say, never who asks (each of its views holds to that),
    and naming the count this way spares compiling the whole query for its key (about 1 ms a page)."""

    values: tuple[str, ...] = ()  # set by paginate_rows for the paginator it makes
    count_key: str = ""  # set by paginate_rows, from the request

    def django_paginator_class(self, object_list: QuerySet, per_page: int) -> CachedCountPaginator:
        # DRF makes its paginator by calling this with the query and the page size; a method, so
        # that the paginator can be told to hand back values() rows.
        return CachedCountPaginator(object_list, per_page, values=self.values, count_key=self.count_key)

    def paginate_rows(
        self, queryset: QuerySet, request: Request, view: APIView, values: Sequence[str]
    ) -> list[dict] | None:
        """paginate_queryset, the page's rows as dicts of `values` (QuerySet.values) rather than model
        instances: the same page, count and errors (ReadOnly.list says why)."""
        self.values = tuple(values)
        self.count_key = self._count_key(request)
        return self.paginate_queryset(queryset, request, view)

    def _count_key(self, request: Request) -> str:
        paging = {self.page_query_param, self.page_size_query_param, "format"}
        asked = sorted((name, value) for name, values in request.query_params.lists() if name not in paging
                       for value in values)  # fmt: skip
        return f"{request.path}?{asked!r}"
