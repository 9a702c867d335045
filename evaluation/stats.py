"""Small statistics helpers (pure Python; no numpy needed)."""

from __future__ import annotations

import math
from collections.abc import Sequence

from .metrics import bootstrap_interval


def median(xs: Sequence[float]) -> float:
    s = sorted(xs)
    n = len(s)
    if n == 0:
        raise ValueError("median of empty sequence")
    mid = n // 2
    return float(s[mid]) if n % 2 else (s[mid - 1] + s[mid]) / 2.0


def central(xs: Sequence[float]) -> float:
    """The interquartile mean (the mean of the middle half; the median below four values).

    The speedup's estimator: robust to the odd slow round like the median, but smooth where the
    rounds fall into two modes (a tensor placement that makes a cuDNN kernel 30 % faster on some
    rounds: docs/measurements.md, "Placement"), where the median jumps from one mode to the other."""
    s = sorted(xs)
    n = len(s)
    if n < 4:
        return median(s)
    q = n / 4.0
    lo, hi = math.floor(q), math.ceil(n - q)
    # whole values strictly inside the quartiles, the two straddling values by the fraction kept
    inner = s[lo:hi] if lo < hi else s[lo:lo + 1]
    w = [1.0] * len(inner)
    if lo < hi:
        w[0] -= q - lo
        w[-1] -= hi - (n - q)
    total = sum(w)
    return sum(x * wi for x, wi in zip(inner, w, strict=True)) / total if total > 0 else median(s)


def mean_of_pairs(first: Sequence[float], second: Sequence[float]) -> list[float]:
    """Round by round, the mean of the two reference processes' times; ``first`` alone where there is
    no second reference process."""
    if not second:
        return list(first)
    return [(a + b) / 2 for a, b in zip(first, second, strict=True)]


def summary(samples_ms: Sequence[float], trials: int) -> dict[str, object]:
    n = len(samples_ms)
    mean = sum(samples_ms) / n
    var = sum((x - mean) ** 2 for x in samples_ms) / (n - 1) if n > 1 else 0.0
    return {
        "median": median(samples_ms),
        "iqm": central(samples_ms),
        "mean": mean,
        "std": math.sqrt(var),
        "min": min(samples_ms),
        "max": max(samples_ms),
        "trials": trials,
        "samples": [float(x) for x in samples_ms],
    }


def bootstrap_speedup_ci(ref: Sequence[float], ker: Sequence[float], n_boot: int = 2000, level: float = 0.95,
                         seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap of central(ref)/central(ker), resampling paired rounds (so drift that
    moved both sides of a round cancels), with the shared metrics.bootstrap_interval."""
    if len(ref) != len(ker) or not ref:
        raise ValueError("need paired, non-empty samples")

    def speedup(rounds: Sequence[tuple[float, float]]) -> float:
        kernel = central([k for _, k in rounds])
        return central([r for r, _ in rounds]) / kernel if kernel > 0 else math.inf

    return bootstrap_interval(list(zip(ref, ker, strict=True)), speedup, n_resamples=n_boot, confidence=level, seed=seed)
