"""What every ingestion shares at its edge: the one error type for "this input has problems" and
the one way to turn uploaded bytes into text.

Every reader (CSV tables, JSON rows, run archives and folders) collects every problem it finds and
raises RowErrors once, so that the caller can answer with the whole list and write nothing.
"""

from __future__ import annotations

BOM = "\ufeff"


class RowErrors(Exception):
    """Every problem found in an input (rows of a table, files of a run); nothing was written."""

    def __init__(self, errors: list[str]):
        super().__init__("; ".join(errors))
        self.errors = errors


def decode_upload(data: bytes, name: str) -> str:
    """Uploaded bytes as text: UTF-8, a leading byte-order mark dropped (spreadsheets add one).
    RowErrors names the input and the first byte that is not UTF-8."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RowErrors([f"{name}: byte {exc.start} is not UTF-8"]) from None
    return text.removeprefix(BOM)


def read_upload(upload, limit: int) -> str:
    """An uploaded file (Django's UploadedFile) as text, refusing one over `limit` bytes before
    reading it."""
    name = upload.name or "upload"
    if upload.size > limit:
        raise RowErrors([f"{name}: {upload.size} bytes; the limit is {limit} bytes"])
    return decode_upload(upload.read(), name)
