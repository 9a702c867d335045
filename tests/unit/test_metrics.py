"""Unit tests of evaluation.results.metrics on hand-computed cases (plain pytest, no database)."""

from __future__ import annotations

import doctest
import math
import random
import statistics
import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from evaluation.results import metrics
from evaluation.results.metrics import (
    ProblemResult,
    best_of_k,
    bootstrap_interval,
    fast_p,
    fast_p_curve,
    fast_p_key,
    geometric_mean_speedup,
    level_summary,
    pass_at_k,
)

# --------------------------------------------------------------------------------------------
# fast_p


def test_fast_p_counts_only_speedups_strictly_above_p():
    # speedups 1.0, 1.0, 2.0 and a failure, 4 problems: at p = 1.0 only the 2.0 counts -> 1/4
    speedups = {"a": 1.0, "b": 1.0, "c": 2.0, "d": None}
    assert fast_p(speedups, 4, 1.0) == 0.25
    # just below 1.0 all three correct kernels count -> 3/4
    assert fast_p(speedups, 4, 0.999) == 0.75
    # at p = 2.0 nothing is strictly above -> 0
    assert fast_p(speedups, 4, 2.0) == 0.0


def test_fast_0_is_the_correctness_rate_even_for_slow_kernels():
    # three correct kernels, one very slow (0.01x), one failure, 5 problems -> 3/5
    assert fast_p([0.01, 0.5, 3.0, None], 5, 0.0) == 0.6


def test_fast_p_counts_missing_problems_in_the_denominator():
    # 2 problems of 10 given, both faster than 1.0: 2/10, not 2/2
    assert fast_p({"p1": 1.2, "p2": 5.0}, 10, 1.0) == 0.2


def test_fast_p_of_empty_input_is_zero():
    # no results at all for a level of 7 problems: 0/7
    assert fast_p({}, 7, 0.0) == 0.0
    assert fast_p([], 7, 1.0) == 0.0


def test_fast_p_accepts_any_iterable():
    # a generator of 1.5, 0.5, None over 3 problems, p = 1 -> 1/3
    assert fast_p((s for s in [1.5, 0.5, None]), 3, 1.0) == pytest.approx(1 / 3)


@pytest.mark.parametrize("n_problems", [0, -1])
def test_fast_p_rejects_a_level_without_problems(n_problems):
    with pytest.raises(ValueError):
        fast_p([], n_problems, 1.0)


def test_fast_p_rejects_more_entries_than_problems():
    with pytest.raises(ValueError, match="smaller than the number of entries"):
        fast_p([1.0, 2.0, None], 2, 1.0)


@pytest.mark.parametrize("bad", [0.0, -1.0, math.nan, math.inf, "fast"])
def test_fast_p_rejects_invalid_speedups(bad):
    with pytest.raises(ValueError):
        fast_p([bad], 1, 1.0)


@pytest.mark.parametrize("bad_p", [-0.1, math.nan, math.inf])
def test_fast_p_rejects_invalid_thresholds(bad_p):
    with pytest.raises(ValueError):
        fast_p([1.0], 1, bad_p)


# --------------------------------------------------------------------------------------------
# fast_p curve and key


def test_fast_p_curve_on_given_thresholds_keeps_their_order():
    # speedups 0.5, 1.0, 2.0, failure; 4 problems
    # p=2.0: 0/4; p=0: 3/4; p=1.0: only 2.0 -> 1/4; p=0.5: 1.0 and 2.0 -> 2/4
    curve = fast_p_curve([0.5, 1.0, 2.0, None], 4, ps=[2.0, 0.0, 1.0, 0.5])
    assert curve == [(2.0, 0.0), (0.0, 0.75), (1.0, 0.25), (0.5, 0.5)]


def test_fast_p_curve_default_grid_includes_the_breakpoints():
    # speedups 1.25 and 5.0 over 2 problems: the grid 0..3 by 0.1 (31 points) plus 1.25 and 5.0
    curve = dict(fast_p_curve([1.25, 5.0], 2))
    assert len(curve) == 33
    assert curve[0.0] == 1.0  # both correct
    assert curve[1.2] == 1.0  # 1.25 > 1.2 and 5.0 > 1.2
    assert curve[1.25] == 0.5  # strict: 1.25 no longer counts, 5.0 does
    assert curve[3.0] == 0.5
    assert curve[5.0] == 0.0
    assert list(curve) == sorted(curve)
    assert 0.3 in curve  # grid points are the exact decimals, not accumulated 0.1 steps


def test_fast_p_key_uses_the_shortest_form():
    assert [fast_p_key(p) for p in (0, 0.5, 0.8, 1.0, 1.5, 2)] == [
        "fast_0",
        "fast_0.5",
        "fast_0.8",
        "fast_1",
        "fast_1.5",
        "fast_2",
    ]


# --------------------------------------------------------------------------------------------
# geometric mean


def test_geometric_mean_over_correct_kernels_only():
    # (2 * 8) ** (1/2) = 4; the failure is skipped
    assert geometric_mean_speedup([2.0, 8.0, None]) == pytest.approx(4.0)


def test_geometric_mean_with_failures_counted_as_no_speedup():
    # (2 * 8 * 1) ** (1/3) = 16 ** (1/3) = 2.519842...
    assert geometric_mean_speedup([2.0, 8.0, None], count_failures_as=1.0) == pytest.approx(16 ** (1 / 3))


def test_geometric_mean_counts_missing_problems_as_failures_when_told_the_level_size():
    # 4 and 0.25 given, 2 more problems missing, each counted as 1.0: (4 * 0.25 * 1 * 1) ** (1/4) = 1
    assert geometric_mean_speedup({"a": 4.0, "b": 0.25}, count_failures_as=1.0, n_problems=4) == pytest.approx(1.0)
    # without count_failures_as the level size does not change the mean: (4 * 9) ** (1/2) = 6
    assert geometric_mean_speedup({"a": 4.0, "b": 9.0}, n_problems=4) == pytest.approx(6.0)


def test_geometric_mean_without_correct_kernels_is_none():
    assert geometric_mean_speedup([]) is None
    assert geometric_mean_speedup([None, None]) is None
    # ... unless failures are counted: (1 * 1) ** (1/2) = 1
    assert geometric_mean_speedup([None, None], count_failures_as=1.0) == 1.0


# --------------------------------------------------------------------------------------------
# pass@k


def test_pass_at_k_known_values():
    # n=5, c=2, k=1: 1 - C(3,1)/C(5,1) = 1 - 3/5 = 0.4
    assert pass_at_k(5, 2, 1) == pytest.approx(0.4)
    # n=5, c=2, k=2: 1 - C(3,2)/C(5,2) = 1 - 3/10 = 0.7
    assert pass_at_k(5, 2, 2) == pytest.approx(0.7)
    # n=10, c=1, k=5: 1 - C(9,5)/C(10,5) = 1 - 126/252 = 0.5
    assert pass_at_k(10, 1, 5) == pytest.approx(0.5)
    # no correct sample: 0; all correct: 1
    assert pass_at_k(4, 0, 2) == 0.0
    assert pass_at_k(4, 4, 1) == 1.0


def test_pass_at_k_is_one_when_k_exceeds_the_failures():
    # n=5, c=2: only 3 failures, so any 4 samples include a correct one
    assert pass_at_k(5, 2, 4) == 1.0
    assert pass_at_k(5, 2, 5) == 1.0


def test_pass_at_k_stays_accurate_for_many_samples():
    # n=200, c=1, k=1: 1/200 exactly (the product form has no huge binomials)
    assert pass_at_k(200, 1, 1) == pytest.approx(0.005, rel=1e-12)
    # cross-check against exact integer binomials: 1 - C(190,50)/C(200,50)
    exact = 1 - math.comb(190, 50) / math.comb(200, 50)
    assert pass_at_k(200, 10, 50) == pytest.approx(exact, rel=1e-12)


@pytest.mark.parametrize(("n", "c", "k"), [(5, 6, 1), (5, -1, 1), (5, 2, 0), (5, 2, 6)])
def test_pass_at_k_rejects_impossible_counts(n, c, k):
    with pytest.raises(ValueError):
        pass_at_k(n, c, k)


# --------------------------------------------------------------------------------------------
# best-of-k


def test_best_of_k_averages_the_best_over_all_subsets():
    # samples 1, 2, 4; k=2: subsets {1,2} {1,4} {2,4} have best 2, 4, 4 -> 10/3
    assert best_of_k([4.0, 1.0, 2.0], 2) == pytest.approx(10 / 3)
    # k=1 is the mean: (1 + 2 + 4) / 3 = 7/3; k=n is the best: 4
    assert best_of_k([4.0, 1.0, 2.0], 1) == pytest.approx(7 / 3)
    assert best_of_k([4.0, 1.0, 2.0], 3) == pytest.approx(4.0)


def test_best_of_k_counts_failures_as_zero_by_default():
    # samples 3, fail, fail; k=2: subsets {3,f} {3,f} {f,f} -> (3 + 3 + 0) / 3 = 2
    assert best_of_k([3.0, None, None], 2) == pytest.approx(2.0)
    # with failures counted as 1.0: (3 + 3 + 1) / 3 = 7/3
    assert best_of_k([3.0, None, None], 2, failure_value=1.0) == pytest.approx(7 / 3)


def test_best_of_k_without_a_correct_sample_is_none():
    assert best_of_k([None, None], 1) is None


@pytest.mark.parametrize("k", [0, 3])
def test_best_of_k_rejects_k_outside_the_samples(k):
    with pytest.raises(ValueError):
        best_of_k([1.0, 2.0], k)


# --------------------------------------------------------------------------------------------
# bootstrap


def test_bootstrap_interval_is_deterministic_under_a_seed():
    values = [0.9, 1.1, 1.0, 1.3, 0.8, 1.2, 1.05, 0.95]
    first = bootstrap_interval(values, statistics.median, seed=7)
    second = bootstrap_interval(values, statistics.median, seed=7)
    assert first == second
    # with many distinct resample means, another seed gives another interval
    spread = [math.sqrt(i) for i in range(1, 31)]
    assert bootstrap_interval(spread, statistics.mean, seed=1) != bootstrap_interval(spread, statistics.mean, seed=2)


def test_bootstrap_interval_brackets_the_statistic():
    values = [float(i) for i in range(1, 21)]  # mean 10.5
    low, high = bootstrap_interval(values, statistics.mean, n_resamples=1000)
    assert low < 10.5 < high
    # the standard error of the mean is about sd/sqrt(20) = 5.92/4.47 = 1.3, so the 95 %
    # interval spans about 2 * 1.96 * 1.3 = 5; allow a wide margin
    assert 3.0 < high - low < 7.0


def test_bootstrap_interval_of_a_constant_is_a_point():
    assert bootstrap_interval([2.0, 2.0, 2.0], statistics.mean) == (2.0, 2.0)


def test_bootstrap_interval_leaves_the_global_random_state_alone():
    random.seed(123)
    expected = random.random()
    random.seed(123)
    bootstrap_interval([1.0, 2.0, 3.0], statistics.mean, n_resamples=50)
    assert random.random() == expected


def test_bootstrap_interval_rejects_empty_input():
    with pytest.raises(ValueError):
        bootstrap_interval([], statistics.mean)


# --------------------------------------------------------------------------------------------
# level summary


def test_level_summary_on_a_hand_computed_level():
    results = [
        # problem 1: two samples, the best correct one (2.0) counts
        ProblemResult(1, compiled=True, correct=True, speedup=0.5),
        ProblemResult(1, compiled=True, correct=True, speedup=2.0),
        # problem 2: correct at exactly 1.0 (not fast_1), and a failed sample
        ProblemResult(2, compiled=False, correct=False),
        ProblemResult(2, compiled=True, correct=True, speedup=1.0),
        # problem 3: compiled, incorrect (its reported speedup is ignored)
        ProblemResult(3, compiled=True, correct=False, speedup=9.0),
        # problem 4: did not compile; problem 5: missing
        ProblemResult(4, compiled=False, correct=False),
    ]
    summary = level_summary(results, n_problems=5)
    assert summary["n_problems"] == 5
    assert summary["attempted"] == 4
    assert summary["compiled_rate"] == pytest.approx(3 / 5)  # problems 1, 2, 3
    assert summary["correct_rate"] == pytest.approx(2 / 5)  # problems 1, 2
    assert summary["fast_0"] == summary["correct_rate"]
    assert summary["fast_0.5"] == pytest.approx(2 / 5)  # 2.0 and 1.0 are > 0.5
    assert summary["fast_0.8"] == pytest.approx(2 / 5)
    assert summary["fast_1"] == pytest.approx(1 / 5)  # 1.0 is not > 1.0
    assert summary["fast_1.5"] == pytest.approx(1 / 5)
    assert summary["fast_2"] == 0.0  # 2.0 is not > 2.0
    # correct only: (2.0 * 1.0) ** (1/2) = sqrt(2)
    assert summary["geomean_speedup"] == pytest.approx(math.sqrt(2))
    # all 5 problems, failures as 1.0: (2 * 1 * 1 * 1 * 1) ** (1/5) = 2 ** 0.2
    assert summary["geomean_speedup_all"] == pytest.approx(2**0.2)


def test_level_summary_of_no_results():
    summary = level_summary([], n_problems=3, ps=(1.0,))
    assert summary == {
        "n_problems": 3,
        "attempted": 0,
        "compiled_rate": 0.0,
        "correct_rate": 0.0,
        "fast_0": 0.0,
        "fast_1": 0.0,
        "geomean_speedup": None,
        "geomean_speedup_all": 1.0,
    }


def test_level_summary_rejects_more_problems_than_the_level_has():
    results = [ProblemResult(i, compiled=True, correct=False) for i in range(3)]
    with pytest.raises(ValueError):
        level_summary(results, n_problems=2)


def test_problem_result_rejects_inconsistent_results():
    with pytest.raises(ValueError):
        ProblemResult(1, compiled=False, correct=True, speedup=1.0)
    with pytest.raises(ValueError):
        ProblemResult(1, compiled=True, correct=True, speedup=None)
    with pytest.raises(ValueError):
        ProblemResult(1, compiled=True, correct=True, speedup=-2.0)


# --------------------------------------------------------------------------------------------
# properties

speedup_lists = st.lists(st.one_of(st.none(), st.floats(min_value=1e-3, max_value=1e3)), max_size=30)
thresholds = st.floats(min_value=0.0, max_value=1e3)


@given(speedups=speedup_lists, extra=st.integers(0, 5), p=thresholds, q=thresholds)
def test_fast_p_is_non_increasing_in_p(speedups, extra, p, q):
    n = len(speedups) + extra or 1
    low, high = sorted((p, q))
    assert fast_p(speedups, n, low) >= fast_p(speedups, n, high)


@given(speedups=speedup_lists, extra=st.integers(0, 5), p=thresholds)
def test_fast_p_is_a_fraction_bounded_by_the_correctness_rate(speedups, extra, p):
    n = len(speedups) + extra or 1
    value = fast_p(speedups, n, p)
    assert 0.0 <= value <= fast_p(speedups, n, 0.0) <= 1.0


@given(speedups=speedup_lists, extra=st.integers(0, 5))
def test_fast_p_curve_is_non_increasing(speedups, extra):
    n = len(speedups) + extra or 1
    values = [v for _, v in fast_p_curve(speedups, n)]
    assert all(a >= b for a, b in zip(values, values[1:], strict=False))


@given(n=st.integers(1, 60), data=st.data())
def test_pass_at_k_is_a_probability_growing_with_k(n, data):
    c = data.draw(st.integers(0, n))
    k = data.draw(st.integers(1, n))
    value = pass_at_k(n, c, k)
    assert 0.0 <= value <= 1.0 + 1e-12
    if k < n:
        assert pass_at_k(n, c, k + 1) >= value - 1e-12


@given(
    samples=st.lists(st.floats(min_value=1e-3, max_value=1e3), min_size=1, max_size=12),
    data=st.data(),
)
def test_best_of_k_lies_between_the_mean_and_the_best(samples, data):
    k = data.draw(st.integers(1, len(samples)))
    value = best_of_k(samples, k)
    assert value is not None
    assert statistics.fmean(samples) * (1 - 1e-9) <= value <= max(samples) * (1 + 1e-9)


def test_docstring_examples_hold():
    failures, tried = doctest.testmod(metrics)
    assert tried > 0
    assert failures == 0


def test_metrics_module_imports_neither_django_nor_torch():
    # Load metrics.py by its path in a fresh interpreter, so that whatever evaluation/__init__.py
    # imports does not count against it.
    code = (
        "import importlib.util, sys; "
        f"spec = importlib.util.spec_from_file_location('metrics_alone', {metrics.__file__!r}); "
        "module = importlib.util.module_from_spec(spec); sys.modules['metrics_alone'] = module; "
        "spec.loader.exec_module(module); "
        "bad = [m for m in sys.modules if m.split('.')[0] in ('django', 'torch', 'numpy')]; "
        "sys.exit(1 if bad else 0)"
    )
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0
