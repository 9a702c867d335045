"""The one way every page says how much of a run (or a board row, a model's level, a kernel) was
measured here, and on what: the overview, the boards, the run, model, problem, kernel and grid pages
all word it through `measured_wording`, so no two of them can say different things of the same
counts (board.store.measured_here is the one count they pass in)."""

from __future__ import annotations

NOT_YET = "not yet measured here"


def measured_wording(measured: int, kernels: int, hardware: str = "") -> str:
    """ "16 of 51 kernels measured here (h200)", "all 51 kernels measured here (h200)", or "not yet
    measured here": the count always beside its whole, so "verified" never hides a part."""
    if measured <= 0:
        return NOT_YET
    on = f" ({hardware})" if hardware else ""
    if kernels and measured < kernels:
        return f"{measured} of {kernels} kernels measured here{on}"
    if kernels:
        return f"all {kernels} kernel{'s' if kernels != 1 else ''} measured here{on}"
    return f"{measured} kernel{'s' if measured != 1 else ''} measured here{on}"


def kernel_wording(measured: bool, correct: bool | None, hardware: str = "") -> str:
    """One kernel: "measured here (h200)", "measured here (h200): fails", or "not yet measured here"."""
    if not measured:
        return NOT_YET
    on = f" ({hardware})" if hardware else ""
    return f"measured here{on}" + ("" if correct else ": not correct")
