"""Leaderboard metrics: pure functions over speedups, with no Django and no torch.

Definitions (DESIGN.md, "Metrics"):

- **speedup** = reference time / kernel time, on the same hardware, for correct kernels only.
  Here a speedup is a positive finite float; ``None`` stands for a kernel that failed (did not
  compile, crashed, timed out or was incorrect).
- **fast_p(level)** = (# problems of the level whose kernel is correct and has speedup
  *strictly* greater than p) / (# problems in the level). Problems missing from the input count as
  failed: the denominator is always the number of problems in the level, never the number of
  results. Since every correct kernel has a speedup > 0, **fast_0 is the correctness rate**.
- **geometric-mean speedup** over correct kernels only; or over all problems with each failure
  counted as a fixed speedup (usually 1.0, "no speedup") where asked.
- With several samples per problem: **pass@k** (the unbiased estimator of Chen et al., 2021),
  **best-of-k** (expected best speedup among k samples) and **bootstrap intervals**.

Everything here uses only the standard library, so that the module runs on a bare GPU host and
gives the same numbers everywhere (the bootstrap uses :class:`random.Random`, not numpy).
"""

from __future__ import annotations

import bisect
import math
import random
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

__all__ = [
    "DEFAULT_PS",
    "MAX_SPEEDUP",
    "MIN_RUNTIME_MS",
    "SpeedupsInput",
    "ProblemResult",
    "best_of_k",
    "bootstrap_interval",
    "fast_p",
    "fast_p_curve",
    "fast_p_key",
    "geometric_mean_speedup",
    "level_summary",
    "pass_at_k",
    "plausible_speedup",
    "speedup_problem",
]

T = TypeVar("T")

#: Speedups of one level: either ``{problem_key: speedup or None}`` or a plain iterable of
#: ``speedup or None`` (one entry per problem). ``None`` means failed or incorrect.
SpeedupsInput = Mapping[Hashable, float | None] | Iterable[float | None]

#: The physical floor on a kernel's (or a reference's) time, in milliseconds: 0.1 µs, below the
#: launch of any GPU kernel and below one Python call. A runtime under it is a measurement error or
#: a made-up number (an imported runtime of 4e-320 ms gave an infinite speedup), never a result.
MIN_RUNTIME_MS = 1e-4

#: The ceiling on a speedup anything stores or shows: a million times the reference (a 10 s
#: reference beaten by a 10 µs kernel). Above it the number says nothing about the kernel.
MAX_SPEEDUP = 1e6

#: The thresholds reported by :func:`level_summary` by default (fast_0 is always reported too).
DEFAULT_PS: tuple[float, ...] = (0.5, 0.8, 1.0, 1.5, 2.0)


# --------------------------------------------------------------------------------------------
# helpers


def _check_speedup(value: float) -> float:
    """Return ``value`` as a float if it is a valid speedup (positive and finite), else raise."""
    try:
        s = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"speedup must be a number or None, got {value!r}") from None
    if not math.isfinite(s) or s <= 0.0:
        raise ValueError(f"speedup must be positive and finite, got {value!r}")
    return s


def plausible_speedup(reference_ms: float | None, kernel_ms: float | None) -> float | None:
    """reference / kernel when both times are finite and at least :data:`MIN_RUNTIME_MS` and the
    ratio is at most :data:`MAX_SPEEDUP`; ``None`` otherwise (no speedup can be stated)."""
    if reference_ms is None or kernel_ms is None:
        return None
    times = (float(reference_ms), float(kernel_ms))
    if not all(math.isfinite(t) and t >= MIN_RUNTIME_MS for t in times):
        return None
    speedup = times[0] / times[1]
    return speedup if speedup <= MAX_SPEEDUP else None


def speedup_problem(speedup: float | None) -> str | None:
    """What is wrong with a speedup about to be stored or shown, or ``None`` when it is a positive
    finite number no larger than :data:`MAX_SPEEDUP` (or ``None`` itself)."""
    if speedup is None:
        return None
    if isinstance(speedup, bool) or not isinstance(speedup, (int, float)) or not math.isfinite(speedup):
        return f"speedup {speedup!r} is not a finite number"
    if speedup <= 0:
        return f"speedup {speedup!r} is not positive"
    if speedup > MAX_SPEEDUP:
        return f"speedup {speedup:.3g} is over the ceiling of {MAX_SPEEDUP:g}"
    return None


def _entries(speedups: SpeedupsInput) -> list[float | None]:
    """The per-problem entries (validated) of a mapping or an iterable of speedups."""
    values: Iterable[Any] = speedups.values() if isinstance(speedups, Mapping) else speedups
    return [None if v is None else _check_speedup(v) for v in values]


def _check_n_problems(n_problems: int, n_entries: int) -> None:
    if isinstance(n_problems, bool) or not isinstance(n_problems, int):
        raise TypeError(f"n_problems must be an int, got {n_problems!r}")
    if n_problems < 1:
        raise ValueError(f"n_problems must be at least 1, got {n_problems}")
    if n_problems < n_entries:
        raise ValueError(f"n_problems ({n_problems}) is smaller than the number of entries given ({n_entries})")


def _check_p(p: float) -> float:
    p = float(p)
    if not math.isfinite(p) or p < 0.0:
        raise ValueError(f"p must be a finite number >= 0, got {p!r}")
    return p


def _fraction_above(sorted_correct: list[float], n_problems: int, p: float) -> float:
    """Fraction of ``n_problems`` whose speedup in ``sorted_correct`` (ascending) is > p."""
    return (len(sorted_correct) - bisect.bisect_right(sorted_correct, p)) / n_problems


# --------------------------------------------------------------------------------------------
# fast_p


def fast_p(speedups: SpeedupsInput, n_problems: int, p: float) -> float:
    """fast_p: the fraction of the level's problems solved correctly with speedup > p.

    ``speedups`` holds one entry per attempted problem (a mapping keyed by problem, or an
    iterable): a positive speedup for a correct kernel, ``None`` for a failed or incorrect one.
    Problems of the level missing from ``speedups`` count as failed, so the denominator is
    ``n_problems``. The comparison is strict: a speedup of exactly ``p`` does not count.
    Because every correct kernel has speedup > 0, ``fast_p(..., p=0)`` is the correctness rate.

    Raises ``ValueError`` if ``n_problems < 1``, if ``n_problems`` is smaller than the number of
    entries, if ``p`` is negative or not finite, or if a speedup is not positive and finite.

    >>> fast_p({"a": 1.5, "b": 0.9, "c": None}, n_problems=4, p=1.0)
    0.25
    """
    entries = _entries(speedups)
    _check_n_problems(n_problems, len(entries))
    p = _check_p(p)
    return sum(1 for s in entries if s is not None and s > p) / n_problems


def fast_p_curve(
    speedups: SpeedupsInput,
    n_problems: int,
    ps: Sequence[float] | None = None,
) -> list[tuple[float, float]]:
    """fast_p over a range of thresholds, as ``[(p, fast_p), ...]``.

    With ``ps`` given, the points come in the order given. By default the grid is 0, 0.1, …, 3.0
    together with every observed speedup of a correct kernel (the curve's breakpoints: fast_p
    is a non-increasing step function of p that drops right *at* each observed speedup, since a
    speedup equal to p does not count), sorted ascending without duplicates. Plotted as a step
    chart (value held until the next point), these points draw the exact curve.
    """
    entries = _entries(speedups)
    _check_n_problems(n_problems, len(entries))
    correct = sorted(s for s in entries if s is not None)
    if ps is None:
        grid = {round(i / 10, 10) for i in range(31)}
        grid.update(correct)
        points = sorted(grid)
    else:
        points = [_check_p(p) for p in ps]
    return [(p, _fraction_above(correct, n_problems, p)) for p in points]


def fast_p_key(p: float) -> str:
    """The stable key naming fast_p in :func:`level_summary`'s result and in JSON exports.

    ``"fast_"`` followed by p in its shortest form (Python's ``format(p, "g")``):
    0 -> ``"fast_0"``, 0.5 -> ``"fast_0.5"``, 1.0 -> ``"fast_1"``, 1.5 -> ``"fast_1.5"``,
    2.0 -> ``"fast_2"``. This matches how KernelBench names the metric (fast_1 = correct and
    faster than the reference).
    """
    return "fast_" + format(_check_p(p), "g")


# --------------------------------------------------------------------------------------------
# geometric mean


def geometric_mean_speedup(
    speedups: SpeedupsInput,
    *,
    count_failures_as: float | None = None,
    n_problems: int | None = None,
) -> float | None:
    """Geometric mean of speedups, exp(mean(log s)).

    By default only correct kernels count (``None`` entries are skipped); the result is ``None``
    when there is no correct kernel. With ``count_failures_as`` set (usually 1.0: "a failure
    gives no speedup"), each failure counts as that speedup instead; and if ``n_problems`` is
    also given, problems missing from ``speedups`` count as failures too, so the mean runs over
    the whole level. ``n_problems`` without ``count_failures_as`` only validates the count.

    >>> geometric_mean_speedup([2.0, 8.0, None])
    4.0
    >>> round(geometric_mean_speedup([2.0, 8.0, None], count_failures_as=1.0), 12)
    2.51984209979
    """
    entries = _entries(speedups)
    if n_problems is not None:
        _check_n_problems(n_problems, len(entries))
    values = [s for s in entries if s is not None]
    if count_failures_as is not None:
        fill = _check_speedup(count_failures_as)
        n_failed = len(entries) - len(values)
        if n_problems is not None:
            n_failed += n_problems - len(entries)
        values.extend([fill] * n_failed)
    if not values:
        return None
    return math.exp(math.fsum(math.log(s) for s in values) / len(values))


# --------------------------------------------------------------------------------------------
# several samples per problem


def pass_at_k(n: int, c: int, k: int) -> float:
    """The unbiased pass@k estimator (Chen et al., 2021, "Evaluating Large Language Models
    Trained on Code"): the probability that at least one of k samples, drawn without replacement
    from n samples of which c are correct, is correct::

        pass@k = 1 - C(n - c, k) / C(n, k)

    computed in the numerically stable product form
    ``1 - prod_{i = n-c+1}^{n} (1 - k / i)``; it is 1.0 whenever ``n - c < k``.

    Raises ``ValueError`` unless ``0 <= c <= n`` and ``1 <= k <= n``.

    >>> round(pass_at_k(5, 2, 1), 12)  # 1 - C(3,1)/C(5,1) = 1 - 3/5
    0.4
    """
    for name, value in (("n", n), ("c", c), ("k", k)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{name} must be an int, got {value!r}")
    if not 0 <= c <= n:
        raise ValueError(f"need 0 <= c <= n, got n={n}, c={c}")
    if not 1 <= k <= n:
        raise ValueError(f"need 1 <= k <= n, got n={n}, k={k}")
    if n - c < k:
        return 1.0
    product = 1.0
    for i in range(n - c + 1, n + 1):
        product *= 1.0 - k / i
    return 1.0 - product


def best_of_k(
    samples_speedups: Sequence[float | None],
    k: int,
    *,
    failure_value: float = 0.0,
) -> float | None:
    """Expected best speedup among k samples of one problem, drawn without replacement.

    The estimator is the analogue of pass@k for speedups: the average, over all C(n, k) subsets
    of k of the n samples, of the largest speedup in the subset. A failed sample (``None``)
    counts as ``failure_value`` (default 0.0: it yields no usable kernel), so a subset of failures
    only scores ``failure_value``. With the samples' values sorted ascending v_1 <= … <= v_n,
    the subset's maximum is v_i with probability C(i-1, k-1) / C(n, k), hence::

        best_of_k = sum_i v_i * C(i - 1, k - 1) / C(n, k)

    computed with exact integer binomials. ``k = n`` gives the best sample; ``k = 1`` the mean.
    Unlike "the best of the first k samples", it does not depend on the order in which samples
    were generated, and uses all n samples to lower the variance.

    Returns ``None`` when no sample is correct. Raises ``ValueError`` unless ``1 <= k <= n``.

    >>> round(best_of_k([1.0, 2.0, 4.0], 2), 12)  # subsets {1,2} {1,4} {2,4}: (2 + 4 + 4) / 3
    3.333333333333
    """
    if isinstance(k, bool) or not isinstance(k, int):
        raise TypeError(f"k must be an int, got {k!r}")
    n = len(samples_speedups)
    if not 1 <= k <= n:
        raise ValueError(f"need 1 <= k <= number of samples ({n}), got k={k}")
    fill = float(failure_value)
    if not math.isfinite(fill) or fill < 0.0:
        raise ValueError(f"failure_value must be finite and >= 0, got {failure_value!r}")
    values = [None if s is None else _check_speedup(s) for s in samples_speedups]
    if all(v is None for v in values):
        return None
    ordered = sorted(fill if v is None else v for v in values)
    total = math.comb(n, k)
    # Weights are exact integers; each term's ratio is converted to float only once.
    return math.fsum(v * (math.comb(i, k - 1) / total) for i, v in enumerate(ordered))


def bootstrap_interval(
    values: Sequence[T],
    statistic: Callable[[Sequence[T]], float],
    n_resamples: int = 2000,
    confidence: float = 0.95,
    seed: int = 0,
) -> tuple[float, float]:
    """Percentile bootstrap interval of ``statistic(values)``.

    Draws ``n_resamples`` resamples of ``values`` with replacement (each as long as ``values``),
    applies ``statistic`` to each, and returns the ``(1 - confidence) / 2`` and
    ``(1 + confidence) / 2`` quantiles of the results (linear interpolation between order
    statistics). Deterministic for a given ``seed``: it uses its own :class:`random.Random`, so
    it neither reads nor disturbs the global random state, and numpy is not needed.

    ``values`` may hold anything ``statistic`` accepts: numbers, or e.g. per-problem results for
    an interval on fast_p, or (reference, kernel) time pairs for an interval on a speedup.
    Raises ``ValueError`` for empty ``values``, ``n_resamples < 1`` or a confidence outside (0, 1).
    """
    data = list(values)
    if not data:
        raise ValueError("bootstrap_interval needs at least one value")
    if isinstance(n_resamples, bool) or not isinstance(n_resamples, int) or n_resamples < 1:
        raise ValueError(f"n_resamples must be a positive int, got {n_resamples!r}")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence!r}")
    rng = random.Random(seed)
    n = len(data)
    stats = sorted(float(statistic(rng.choices(data, k=n))) for _ in range(n_resamples))
    alpha = (1.0 - confidence) / 2.0
    return _quantile(stats, alpha), _quantile(stats, 1.0 - alpha)


def _quantile(sorted_values: list[float], q: float) -> float:
    """Quantile q of ascending values, linear interpolation (numpy's default, "linear")."""
    position = q * (len(sorted_values) - 1)
    low = math.floor(position)
    high = min(low + 1, len(sorted_values) - 1)
    fraction = position - low
    return sorted_values[low] + (sorted_values[high] - sorted_values[low]) * fraction


# --------------------------------------------------------------------------------------------
# one level's row of the leaderboard


@dataclass(frozen=True)
class ProblemResult:
    """One evaluated kernel (one sample) for one problem of a level.

    ``problem`` is any hashable key (e.g. the problem's number or ``(level, number)``).
    A correct result must have compiled and must carry a positive finite speedup; the speedup of
    an incorrect result is ignored (it may be ``None`` or anything the harness reported).
    """

    problem: Hashable
    compiled: bool
    correct: bool
    speedup: float | None = None

    def __post_init__(self) -> None:
        if self.correct and not self.compiled:
            raise ValueError(f"result for {self.problem!r} is correct but did not compile")
        if self.correct:
            if self.speedup is None:
                raise ValueError(f"correct result for {self.problem!r} has no speedup")
            _check_speedup(self.speedup)


def level_summary(
    results: Iterable[ProblemResult],
    n_problems: int,
    ps: Sequence[float] = DEFAULT_PS,
) -> dict[str, Any]:
    """One level's leaderboard row, from the results of its problems.

    Several results for one problem (samples, or repeated attempts) are merged per problem:
    it counts as compiled if any result compiled, as correct if any result is correct, and its
    speedup is the **best speedup among its correct results** (an oracle best-of-n; use
    :func:`best_of_k` and :func:`pass_at_k` for unbiased per-k figures). Problems without a
    result count as failed. The returned dict has these keys, all stable:

    - ``n_problems``: the denominator, as given;
    - ``attempted``: number of distinct problems with at least one result;
    - ``compiled_rate``: fraction of the level's problems with a result that compiled;
    - ``correct_rate``: fraction with a correct result (equal to ``fast_0``);
    - ``"fast_0"`` and one key per p in ``ps``, named by :func:`fast_p_key`
      (``"fast_0.5"``, ``"fast_0.8"``, ``"fast_1"``, ``"fast_1.5"``, ``"fast_2"`` by default);
    - ``geomean_speedup``: geometric mean over correct problems only (``None`` if none);
    - ``geomean_speedup_all``: geometric mean over all ``n_problems``, failed and missing ones
      counting as speedup 1.0.

    Raises ``ValueError`` if more distinct problems have results than ``n_problems``.
    """
    compiled: set[Hashable] = set()
    best: dict[Hashable, float | None] = {}
    for result in results:
        best.setdefault(result.problem, None)
        if result.compiled:
            compiled.add(result.problem)
        if result.correct:
            assert result.speedup is not None  # enforced by ProblemResult
            speedup = float(result.speedup)
            current = best[result.problem]
            if current is None or speedup > current:
                best[result.problem] = speedup
    _check_n_problems(n_problems, len(best))

    summary: dict[str, Any] = {
        "n_problems": n_problems,
        "attempted": len(best),
        "compiled_rate": len(compiled) / n_problems,
        "correct_rate": fast_p(best, n_problems, 0.0),
        fast_p_key(0.0): fast_p(best, n_problems, 0.0),
    }
    for p in ps:
        summary[fast_p_key(p)] = fast_p(best, n_problems, p)
    summary["geomean_speedup"] = geometric_mean_speedup(best)
    summary["geomean_speedup_all"] = geometric_mean_speedup(best, count_failures_as=1.0, n_problems=n_problems)
    return summary
