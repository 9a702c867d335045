"""Bounded values from untrusted replies: numbers, counts and text (see instruments.sanitize)."""

from __future__ import annotations

import math
from typing import Any


def number(value: Any, low: float, high: float) -> float | None:
    """``value`` as a float clamped to [low, high]; None unless a finite int or float (not a bool)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        f = float(value)
    except OverflowError:  # an int past float's range
        return high if value > 0 else low
    return min(max(f, low), high) if math.isfinite(f) else None


def count(value: Any, high: int = 10**9) -> int:
    """A count: a non-negative integer (0 where ``value`` is not a number)."""
    return int(number(value, 0, high) or 0)


def text(value: Any, limit: int) -> str:
    """``value`` if a string: printable characters only, at most ``limit`` of them."""
    if not isinstance(value, str):
        return ""
    return "".join(c for c in value[: 4 * limit] if c.isprintable())[:limit]
