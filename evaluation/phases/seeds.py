"""Seeds of an evaluation, all derived from one (secret) master seed."""

from __future__ import annotations

import hashlib
from typing import Any


def derive_seed(master: int, *parts: Any) -> int:
    """A 63-bit seed for ``parts`` (e.g. ``("correct", 2)``), SHA-256 of the master seed and the parts."""
    h = hashlib.sha256(repr((master, *parts)).encode()).digest()
    return int.from_bytes(h[:8], "little") & ((1 << 63) - 1)
