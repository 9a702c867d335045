"""What every resource module of the API builds on: the read-only base viewset (and its lists served
from rows), the schema entry of a query parameter, and a slug field that refuses text PostgreSQL
would refuse."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from django.conf import settings
from django.utils import timezone
from drf_spectacular.utils import OpenApiParameter
from rest_framework import serializers, viewsets
from rest_framework.renderers import BrowsableAPIRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.reverse import reverse

from leaderboard.api.renderers import AsciiJSONRenderer
from leaderboard.ingest.model_names import find_model
from leaderboard.models import LanguageModel
from problems.models import Hardware
from problems.text import control_character_problem, name_problem


def query_param(name: str, type_=str, description: str = "", enum=None) -> OpenApiParameter:
    """How a list filter (?name=...) appears in the OpenAPI schema."""
    return OpenApiParameter(name, type_, OpenApiParameter.QUERY, required=False, description=description, enum=enum)


class ReadOnly(viewsets.ReadOnlyModelViewSet):
    # Lists and details; a `detail_serializer_class` adds the large fields on detail pages.
    # (A comment, not a docstring: drf-spectacular would show a base class's docstring as the
    # description of every viewset that has none of its own.)

    detail_serializer_class: type[serializers.Serializer] | None = None
    renderer_classes = [AsciiJSONRenderer, BrowsableAPIRenderer]
    lookup_value_regex = r"\d+"  # ids; viewsets looked up by slug say so

    # A list may instead be served from values() rows, no model instances and no serializer per row
    # (at 13 M kernels those were two thirds of the time of a page of 50): `list_values` names what a
    # row needs, `row_writer()` writes one as the serializer would, for this request. Such a view's
    # pagination_class is CachedCountPagination (it counts the query, pages the rows); its tests
    # compare the two byte for byte (tests/api/test_list_rows.py).
    list_values: tuple[str, ...] = ()

    def get_serializer_class(self):
        if self.action == "retrieve" and self.detail_serializer_class is not None:
            return self.detail_serializer_class
        return super().get_serializer_class()

    def row_writer(self) -> Callable[[dict], dict]:
        raise NotImplementedError(f"{type(self).__name__} names list_values but writes no rows")

    def list(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        if not self.list_values:
            return super().list(request, *args, **kwargs)
        queryset = self.filter_queryset(self.get_queryset())
        rows = self.paginator.paginate_rows(queryset, request, self, self.list_values)
        write = self.row_writer()
        if rows is None:  # no page size: every row, as ListModelMixin would
            return Response([write(row) for row in queryset.values(*self.list_values)])
        return self.get_paginated_response([write(row) for row in rows])


STAND_IN = 987654321987  # digits, as the detail routes' <pk> takes; in no real URL's host or path


def row_urls(request: Request, view_name: str, format: str | None = None, kwarg: str = "pk") -> Callable[[Any], str]:
    """Each row's own URL from its key, as HyperlinkedIdentityField writes it, reversed once per list
    (with a stand-in key, then each row's key put in its place): a reverse() and
    build_absolute_uri() per row were a fifth of serializing a page of 50 rows."""
    made = reverse(view_name, kwargs={kwarg: STAND_IN}, request=request, format=format)
    stand_in = str(STAND_IN)
    return lambda key: made.replace(stand_in, str(key), 1)


def datetime_texts() -> Callable[[datetime | None], str | None]:
    """How ModelSerializer's DateTimeField writes a datetime (DRF's own to_representation), with the
    time zone looked up once per list rather than once per value (12 of a value's 16 us)."""
    zone = timezone.get_current_timezone() if settings.USE_TZ else None
    return serializers.DateTimeField(default_timezone=zone).to_representation


class IdentityUrl(serializers.HyperlinkedIdentityField):
    """A row's own URL, as HyperlinkedIdentityField writes it, reversed once per list (row_urls)."""

    def get_url(self, obj, view_name, request, format):
        if getattr(obj, "pk", None) in (None, ""):
            return None
        made = self.context.setdefault("_identity_urls", {})  # one serializing: one request
        key = (view_name, format, self.lookup_field)
        if key not in made:
            made[key] = row_urls(request, view_name, format, self.lookup_url_kwarg)
        return made[key](getattr(obj, self.lookup_field))


class PlainText(serializers.CharField):
    """Text that names or describes something (a model, a lab, a run's name or setting): no
    control characters (problems/text.py), a 400 naming the field and the character. `multiline`
    lets tab and line breaks through (notes)."""

    default_error_messages = {"control": "{problem}"}

    def __init__(self, multiline: bool = False, **kwargs):
        self.multiline = multiline
        super().__init__(**kwargs)

    def to_internal_value(self, data):
        text = super().to_internal_value(data)
        if problem := control_character_problem(text, self.multiline):
            self.fail("control", problem=problem)
        return text


class NameText(PlainText):
    """The name of a model: PlainText that is also a name (problems.text.name_problem: not blank
    once normalised, no invisible, filler or lone combining character), a 400 saying why."""

    default_error_messages = {"name": "{problem}"}

    def to_internal_value(self, data):
        text = super().to_internal_value(data)
        if problem := name_problem(text):
            self.fail("name", problem=f"The name {problem}.")
        return text


class SlugField(serializers.SlugRelatedField):
    """A slug lookup that refuses, before querying, text that PostgreSQL would refuse (NUL)."""

    def to_internal_value(self, data):
        if isinstance(data, str) and ("\x00" in data or not data.isprintable()):
            self.fail("invalid")
        return super().to_internal_value(data)


class HardwareField(SlugField):
    """A hardware named by its slug or its display name, case-insensitively
    (problems.models.HardwareQuerySet.resolve): the same rule as the import commands."""

    def __init__(self, **kwargs):
        kwargs.setdefault("slug_field", "slug")
        kwargs.setdefault("queryset", Hardware.objects.all())
        super().__init__(**kwargs)

    def to_internal_value(self, data):
        if not isinstance(data, str) or "\x00" in data or not data.isprintable():
            self.fail("invalid")
        hardware = self.get_queryset().resolve(data)
        if hardware is None:
            raise serializers.ValidationError(f"no hardware {data[:60]!r}; the hardware: {Hardware.objects.listing()}")
        return hardware


class ModelNameField(SlugField):
    """A model named by its slug, an alias or its name (leaderboard.ingest.model_names.find_model:
    exact matches only, the same rule as every importer)."""

    def __init__(self, **kwargs):
        kwargs.setdefault("slug_field", "slug")
        kwargs.setdefault("queryset", LanguageModel.objects.all())
        super().__init__(**kwargs)

    def to_internal_value(self, data):
        if not isinstance(data, str) or "\x00" in data or not data.isprintable() or len(data) > 200:
            self.fail("invalid")
        model = find_model(data)
        if model is None:
            self.fail("does_not_exist", slug_name=self.slug_field, value=data)
        return model
