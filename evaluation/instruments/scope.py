"""Which correct kernels the reviewer's instruments are for: one rule, read by the instruments' phase
and by the site, which runs them later (apart from the verdict) only for the kernels they would
have run for inline.
"""

from __future__ import annotations


def surely_slower(floor: float | None, speedup: float | None, interval: tuple[float, float] | None) -> str:
    """Why the instruments need not run ('' when they must): the kernel is slower than the reference
    over its whole speedup interval (below ``floor``, the config's ``instruments_min_speedup``), so
    no trick they look for made it look fast. None for ``floor`` or ``speedup``: they run."""
    if floor is None or speedup is None:
        return ""
    high = interval[1] if interval else speedup
    if high >= floor:
        return ""
    return f"not run: the kernel is slower than the reference (at most {high:.2f}x, under {floor:g}x)"
