"""Request body parsers: strict JSON (every JSON route; REST_FRAMEWORK["DEFAULT_PARSER_CLASSES"])
and CSV as text."""

from __future__ import annotations

from rest_framework.exceptions import ParseError
from rest_framework.parsers import BaseParser, JSONParser

from leaderboard.ingest.uploads import RowErrors, decode_upload, strict_json


class StrictJSONParser(JSONParser):
    """`application/json` read by ingest.uploads.strict_json: a duplicate key, NaN, or nesting too
    deep for Python's parser (a RecursionError, hence a 500, with DRF's own parser) is a 400."""

    def parse(self, stream, media_type=None, parser_context=None):
        data = stream.read() if stream is not None else b""
        try:
            return strict_json(data)
        except ValueError as exc:  # UnicodeDecodeError included
            raise ParseError(f"JSON parse error - {exc}") from None


class CsvParser(BaseParser):
    """`Content-Type: text/csv`: the body as one UTF-8 string."""

    media_type = "text/csv"

    def parse(self, stream, media_type=None, parser_context=None) -> str:
        data = stream.read() if stream is not None else b""
        try:
            return decode_upload(data, "CSV body")
        except RowErrors as exc:
            raise ParseError(exc.errors[0]) from None
