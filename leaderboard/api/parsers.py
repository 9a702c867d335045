"""Request body parsers, every one bounded before it reads, so that no body costs the server
unbounded memory or time: strict JSON (every JSON route; REST_FRAMEWORK["DEFAULT_PARSER_CLASSES"]),
CSV as text, multipart and form bodies.

A body over the route's cap is a 413 naming the cap, from Content-Length, before a byte is read.
The cap is the view's `body_max_bytes()` where it declares one (run uploads, tables, submissions),
else settings.API_BODY_MAX_BYTES."""

from __future__ import annotations

from django.conf import settings
from rest_framework.exceptions import ParseError
from rest_framework.parsers import BaseParser, FormParser, JSONParser, MultiPartParser

from leaderboard.api.common import PayloadTooLarge, check_body_size
from leaderboard.ingest.uploads import RowErrors, decode_upload, strict_json


def body_limit(parser_context) -> int:
    view = (parser_context or {}).get("view")
    declared = getattr(view, "body_max_bytes", None)
    return declared() if declared is not None else settings.API_BODY_MAX_BYTES


def read_bounded(stream, parser_context) -> bytes:
    """The body, refused (413) when Content-Length passes the route's cap, and read no further than
    the cap whatever the header said."""
    limit = body_limit(parser_context)
    check_body_size((parser_context or {}).get("request"), limit)
    data = stream.read(limit + 1) if stream is not None else b""
    if len(data) > limit:
        raise PayloadTooLarge(f"Request body is over {limit} bytes; the limit here is {limit} bytes.")
    return data


class StrictJSONParser(JSONParser):
    """`application/json` read by ingest.uploads.strict_json: a duplicate key, NaN, too many keys,
    or nesting too deep for Python's parser (a RecursionError, hence a 500, with DRF's own parser)
    is a 400."""

    def parse(self, stream, media_type=None, parser_context=None):
        data = read_bounded(stream, parser_context)
        try:
            return strict_json(data)
        except ValueError as exc:  # UnicodeDecodeError included
            raise ParseError(f"JSON parse error - {exc}") from None


class CsvParser(BaseParser):
    """`Content-Type: text/csv`: the body as one UTF-8 string."""

    media_type = "text/csv"

    def parse(self, stream, media_type=None, parser_context=None) -> str:
        data = read_bounded(stream, parser_context)
        try:
            return decode_upload(data, "CSV body")
        except RowErrors as exc:
            raise ParseError(exc.errors[0]) from None


class BoundedMultiPartParser(MultiPartParser):
    """multipart/form-data (file uploads), refused from Content-Length over the route's cap."""

    def parse(self, stream, media_type=None, parser_context=None):
        check_body_size((parser_context or {}).get("request"), body_limit(parser_context))
        return super().parse(stream, media_type, parser_context)


class BoundedFormParser(FormParser):
    """application/x-www-form-urlencoded, refused from Content-Length over the route's cap."""

    def parse(self, stream, media_type=None, parser_context=None):
        check_body_size((parser_context or {}).get("request"), body_limit(parser_context))
        return super().parse(stream, media_type, parser_context)
