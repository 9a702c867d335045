"""Small statistics helpers (pure Python; no numpy needed)."""

from __future__ import annotations

import math
from collections.abc import Sequence

from evaluation.results.metrics import bootstrap_interval


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
    inner = s[lo:hi] if lo < hi else s[lo : lo + 1]
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


# Two speedups of one kernel agree within this share of the smaller one.
AGREE_WITHIN = 0.02
# Speedups whose ratio is exactly 1.02 read 1.0200000000000002 in floating point: still within.
_ROUNDING = 1e-9

Interval = Sequence[float | None]


def speedup_gap(a: float | None, b: float | None) -> float | None:
    """max/min - 1 (so 2.00x and 2.20x are 10 % apart whichever came first); None unless both are
    positive figures."""
    if not a or not b or a <= 0 or b <= 0:
        return None
    return max(a, b) / min(a, b) - 1


def speedups_within(a: float | None, b: float | None) -> bool:
    """Both are figures, within AGREE_WITHIN of each other."""
    gap = speedup_gap(a, b)
    return gap is not None and gap <= AGREE_WITHIN + _ROUNDING


def interval_covers(interval: Interval | None, figure: float | None) -> bool:
    """The interval ``(low, high)`` holds ``figure``; False when either is missing."""
    if figure is None or not interval or len(interval) != 2 or None in interval:
        return False
    low, high = interval
    return low <= figure <= high  # type: ignore[operator]


def speedups_agree(
    a: float | None,
    b: float | None,
    a_host_bound_interval: Interval | None = None,
    b_host_bound_interval: Interval | None = None,
) -> bool:
    """Two speedups of one kernel (same verdict: the caller's check) agree: one is missing (nothing to
    compare), they lie within AGREE_WITHIN of each other, or a host-bound side's 95 % interval covers
    the other's figure. Pass a side's interval only when it is host-bound: only a host-bound reading
    depends on the process that took it, and only its interval is widened to cover what another
    process reads (evaluation/phases/host_bound.py). The GPU check's rule and the site's."""
    if speedup_gap(a, b) is None or speedups_within(a, b):
        return True
    return interval_covers(a_host_bound_interval, b) or interval_covers(b_host_bound_interval, a)


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


def bootstrap_speedup_ci(
    ref: Sequence[float], ker: Sequence[float], n_boot: int = 2000, level: float = 0.95, seed: int = 0
) -> tuple[float, float]:
    """Percentile bootstrap of central(ref)/central(ker), resampling paired rounds (so drift that
    moved both sides of a round cancels), with the shared metrics.bootstrap_interval."""
    if len(ref) != len(ker) or not ref:
        raise ValueError("need paired, non-empty samples")

    def speedup(rounds: Sequence[tuple[float, float]]) -> float:
        kernel = central([k for _, k in rounds])
        return central([r for r, _ in rounds]) / kernel if kernel > 0 else math.inf

    return bootstrap_interval(
        list(zip(ref, ker, strict=True)), speedup, n_resamples=n_boot, confidence=level, seed=seed
    )
