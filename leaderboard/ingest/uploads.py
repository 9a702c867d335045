"""What every ingestion shares at its edge: the one error type for "this input has problems" and
the one way to turn uploaded bytes into text.

Every reader (CSV tables, JSON rows, run archives and folders) collects every problem it finds and
raises RowErrors once, so that the caller can answer with the whole list and write nothing.
"""

from __future__ import annotations

import json
from typing import Any

from django.conf import settings

BOM = "\ufeff"
# Deeper JSON than this is refused: no input of ours nests more than a few levels, and Python's
# parser and every later walk over the value would otherwise hit the recursion limit (a 500).
MAX_JSON_DEPTH = 64


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


class _ObjectReader:
    """json.loads' object_pairs_hook for strict_json: refuses duplicate keys (in time linear in the
    keys: a count per key was quadratic, 17.5 s for 20,000 keys) and counts every key
    of every object as the parser completes it, stopping the parse once there are more than
    `max_keys` in all."""

    def __init__(self, max_keys: int):
        self.max_keys, self.keys = max_keys, 0

    def __call__(self, pairs: list[tuple[str, Any]]) -> dict:
        self.keys += len(pairs)
        if self.keys > self.max_keys:
            raise ValueError(f"more than {self.max_keys} keys in all; the limit is {self.max_keys}")
        value = dict(pairs)
        if len(value) < len(pairs):
            seen: set[str] = set()
            duplicated = sorted({key for key, _ in pairs if key in seen or seen.add(key)})
            raise ValueError(f"duplicate key(s) {', '.join(repr(key)[:40] for key in duplicated[:10])}")
        return value


def _no_constants(token: str) -> None:
    raise ValueError(f"{token} is not allowed")


def _depth(value: Any) -> int:
    """How deeply lists and objects nest in `value` (iteratively: no recursion to run out of)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is not None:
            deepest = max(deepest, depth)
            if deepest > MAX_JSON_DEPTH:
                break
            stack.extend((child, depth + 1) for child in children)
    return deepest


def strict_json(text: str | bytes, max_keys: int | None = None) -> Any:
    """The one JSON reading for everything that comes from outside: no duplicate keys (the last
    would silently win), no NaN or Infinity, nesting at most MAX_JSON_DEPTH, at most `max_keys`
    object keys in all (settings.JSON_MAX_KEYS by default), counted while parsing. ValueError says
    why. Its work is linear in the text: the parser is json's C scanner, the checks are linear."""
    hook = _ObjectReader(settings.JSON_MAX_KEYS if max_keys is None else max_keys)
    try:
        value = json.loads(text, object_pairs_hook=hook, parse_constant=_no_constants)
    except RecursionError:
        raise ValueError(f"nested deeper than {MAX_JSON_DEPTH} levels") from None
    if _depth(value) > MAX_JSON_DEPTH:
        raise ValueError(f"nested deeper than {MAX_JSON_DEPTH} levels")
    return value
