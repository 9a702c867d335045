"""Small statistics helpers (pure Python; no numpy needed)."""

from __future__ import annotations

import math
import random
from collections.abc import Sequence


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
    """Percentile bootstrap of median(ref)/median(ker), resampling paired rounds."""
    if len(ref) != len(ker) or not ref:
        raise ValueError("need paired, non-empty samples")
    n = len(ref)
    rng = random.Random(seed)
    stats = []
    for _ in range(n_boot):
        idx = [rng.randrange(n) for _ in range(n)]
        k = median([ker[i] for i in idx])
        r = median([ref[i] for i in idx])
        stats.append(r / k if k > 0 else math.inf)
    stats.sort()
    lo = stats[int((1 - level) / 2 * n_boot)]
    hi = stats[min(n_boot - 1, int((1 + level) / 2 * n_boot))]
    return (lo, hi)
