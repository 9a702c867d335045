"""What kbl expects of each reply, checked before anything is read from it: a reply of another
shape (a proxy's error page, another version of the site, a hostile server) ends in exit 3 and a
message naming what was missing, never in a traceback.

A shape is a type (or a tuple of types) the value must be, a dict of the keys an object must have
(others are ignored) and their shapes ("*": every value), or a one-item list: a list whose items
all have that shape.
Optional(shape): the key may be missing or null.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kbl.errors import ApiError

NUMBER = (int, float)


@dataclass(frozen=True)
class Optional:
    shape: Any


class UnexpectedReply(ApiError):
    """The site answered, but not with what this command reads."""


def _type_name(shape: Any) -> str:
    if isinstance(shape, tuple):
        return " or ".join(t.__name__ for t in shape)
    return shape.__name__


def _check(value: Any, shape: Any, where: str) -> None:
    if isinstance(shape, Optional):
        if value is not None:
            _check(value, shape.shape, where)
    elif isinstance(shape, dict):
        _check_object(value, shape, where)
    elif isinstance(shape, list):
        if not isinstance(value, list):
            raise UnexpectedReply(f"{where} is not a list")
        for index, item in enumerate(value):
            _check(item, shape[0], f"{where}[{index}]")
    elif not isinstance(value, shape) or (isinstance(value, bool) and shape is not bool):
        raise UnexpectedReply(f"{where} is not {_type_name(shape)}")  # (True is an int to Python, not to JSON)


def _check_object(value: Any, shape: dict, where: str) -> None:
    if not isinstance(value, dict):
        raise UnexpectedReply(f"{where} is not an object")
    for key, inner in shape.items():
        if key == "*":  # every value
            for name, item in value.items():
                _check(item, inner, f"{where}.{name}")
        elif key not in value and not isinstance(inner, Optional):
            raise UnexpectedReply(f"{where} has no {key!r}")
        else:
            _check(value.get(key), inner, f"{where}.{key}")


def expect(value: Any, shape: Any, url: str) -> Any:
    """`value` when it has `shape`; UnexpectedReply naming the URL and the first thing amiss otherwise."""
    try:
        _check(value, shape, "the reply")
    except UnexpectedReply as exc:
        raise UnexpectedReply(f"unexpected reply from {url}: {exc}") from None
    return value


RUN = {"id": int, "model": str, "setting": str, "precision": str, "hardware": str}
RUN_PROGRESS = {"total": int, "evaluated": int, "failed": int, "pending": int, "not_evaluated": Optional(int),
                "label": str}  # fmt: skip
IMPORTED = {"run": {"id": int}, "kernels": {"created": int, "unchanged": int}, "warnings": Optional([str])}
VERIFIED = {"queued": int, "skipped": int}
LEVEL = {
    "level": int, "n_problems": int, "fast_p": {"*": Optional(NUMBER)}, "geomean_speedup": Optional(NUMBER),
    "best_of_n": Optional({"*": Optional(NUMBER)}), "unscored": Optional(int),
}  # fmt: skip
SCORES = {"run": RUN, "progress": RUN_PROGRESS, "levels": [LEVEL]}
SUBMITTED = {"id": int, "kernel": int, "status": str}
EVALUATION = {"state": str, "status": Optional(str), "correct": Optional(bool), "speedup": Optional(NUMBER),
              "progress": {"label": str}}  # fmt: skip
