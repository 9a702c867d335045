"""How a failure inside a sandboxed process is told to its parent: its kind (the host's, a crash, or
the code's runtime error) and one line that says it."""

from __future__ import annotations

from evaluation.sandbox.host_errors import INFRASTRUCTURE_ERROR, host_error


class LazyTensorError(Exception):
    """An output that is no finished tensor on the expected device (a lazy or fake tensor)."""


def one_line(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}".strip().splitlines()
    line = text[0] if text else type(exc).__name__
    # Prefer the most informative line of compiler errors.
    for candidate in text:
        if "error:" in candidate and len(candidate) < 400:
            line = f"{type(exc).__name__}: {candidate.strip()}"
            break
    return line[:500]


def classify_exception(exc: BaseException) -> str:
    if host_error(exc):  # no space, quota, I/O error: the host's, not the code's (evaluation.sandbox.host_errors)
        return INFRASTRUCTURE_ERROR
    text = f"{type(exc).__name__} {exc}"
    if isinstance(exc, MemoryError) or "can't allocate memory" in text or "out of memory" in text.lower():
        return "crashed"
    markers = ("illegal memory access", "device-side assert", "unspecified launch failure", "CUDA error",
               "misaligned address", "illegal instruction")
    if any(m in text for m in markers):
        return "crashed"
    return "runtime_error"
