"""Template filters for the leaderboard pages.

Nothing here marks text safe: filters return plain strings, which the template engine escapes.
"""

from __future__ import annotations

import math
from urllib.parse import urlsplit

from django import template
from django.http import QueryDict

from leaderboard.reads.measured import measured_wording

register = template.Library()


@register.filter
def http_url(value: object) -> str:
    """`value` if it is an absolute http(s) URL, else '' (no javascript:, data:, relative...)."""
    text = str(value or "").strip()
    try:
        parts = urlsplit(text)
    except ValueError:
        return ""
    if parts.scheme.lower() in ("http", "https") and parts.netloc:
        return text
    return ""


def _finite(value: object) -> float | None:
    """The value as a finite float, or None when it is missing, not a number, NaN or infinite."""
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError):  # OverflowError: an integer past a float's range
        return None
    return number if math.isfinite(number) else None


@register.filter
def pct(value: object, digits: int = 1) -> str:
    """A fraction (0.125) as a percentage ('12.5%'); '–' when missing."""
    number = _finite(value)
    return "–" if number is None else f"{number * 100:.{int(digits)}f}%"


@register.filter
def times(value: object, digits: int = 2) -> str:
    """A speedup (1.234) as '1.23x'; '–' when missing."""
    number = _finite(value)
    return "–" if number is None else f"{number:.{int(digits)}f}x"


@register.filter
def ms(value: object) -> str:
    """A time in milliseconds ('0.1211 ms'); '–' when missing."""
    number = _finite(value)
    return "–" if number is None else f"{number:.4g} ms"


@register.filter
def get_item(mapping: object, key: object) -> object:
    try:
        return mapping[key]  # type: ignore[index]
    except (KeyError, IndexError, TypeError):
        return None


@register.simple_tag(takes_context=True)
def query_with(context: template.Context, **changes: object) -> str:
    """The current query string with `changes` applied (None or '' removes a key). Returned
    unescaped: the template's autoescaping escapes it."""
    request = context.get("request")
    params: QueryDict = request.GET.copy() if request is not None else QueryDict(mutable=True)
    for key, value in changes.items():
        if value is None or value == "":
            params.pop(key, None)
        else:
            params[key] = str(value)
    encoded = params.urlencode()
    return f"?{encoded}" if encoded else "?"


@register.simple_tag
def measured(measured: int, kernels: int, hardware: str = "") -> str:
    """How much was measured here, in the one wording every page uses (reads.measured)."""
    return measured_wording(measured or 0, kernels or 0, hardware or "")
