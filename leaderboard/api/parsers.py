"""Request body parsers beyond DRF's JSON and multipart: CSV as text."""

from __future__ import annotations

from rest_framework.exceptions import ParseError
from rest_framework.parsers import BaseParser

from leaderboard.ingest.uploads import RowErrors, decode_upload


class CsvParser(BaseParser):
    """`Content-Type: text/csv`: the body as one UTF-8 string."""

    media_type = "text/csv"

    def parse(self, stream, media_type=None, parser_context=None) -> str:
        data = stream.read() if stream is not None else b""
        try:
            return decode_upload(data, "CSV body")
        except RowErrors as exc:
            raise ParseError(exc.errors[0]) from None
