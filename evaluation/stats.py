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


def summary(samples_ms: Sequence[float], trials: int) -> dict[str, object]:
    n = len(samples_ms)
    mean = sum(samples_ms) / n
    var = sum((x - mean) ** 2 for x in samples_ms) / (n - 1) if n > 1 else 0.0
    return {
        "median": median(samples_ms),
        "mean": mean,
        "std": math.sqrt(var),
        "min": min(samples_ms),
        "max": max(samples_ms),
        "trials": trials,
        "samples": [float(x) for x in samples_ms],
    }


def bootstrap_speedup_ci(ref: Sequence[float], ker: Sequence[float], n_boot: int = 2000, level: float = 0.95,
                         seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap of median(ref)/median(ker), resampling paired rounds (so drift that
    moved both sides of a round cancels), with the shared metrics.bootstrap_interval."""
    if len(ref) != len(ker) or not ref:
        raise ValueError("need paired, non-empty samples")

    def speedup(rounds: Sequence[tuple[float, float]]) -> float:
        kernel = median([k for _, k in rounds])
        return median([r for r, _ in rounds]) / kernel if kernel > 0 else math.inf

    return bootstrap_interval(list(zip(ref, ker, strict=True)), speedup, n_resamples=n_boot, confidence=level, seed=seed)
