"""The adaptive stop of the timing rounds: on the interval's width only, with a floor."""

from __future__ import annotations

import random

from evaluation.stats import central, median
from evaluation.timing import Rounds, extra_rounds, narrow_enough
from evaluation.types import EvaluationConfig


def rounds(n: int, noise: float, ratio: float = 1.0, seed: int = 0) -> Rounds:
    rng = random.Random(seed)
    r = Rounds(calls=10)
    for _ in range(n):
        r.ref.append(ratio * (1 + rng.gauss(0, noise)))
        r.ker.append(1 + rng.gauss(0, noise))
    return r


def test_quiet_rounds_stop_at_the_floor():
    assert narrow_enough(rounds(6, 0.001), target=0.01, floor=6)
    assert not narrow_enough(rounds(5, 0.001), target=0.01, floor=6)  # never below the floor


def test_noisy_rounds_go_on():
    assert not narrow_enough(rounds(6, 0.05), target=0.01, floor=6)
    assert narrow_enough(rounds(500, 0.05), target=0.01, floor=6)


def test_the_rule_ignores_where_the_speedup_lies():
    for ratio in (0.5, 1.0, 3.0):  # same noise, other speedups: same decision
        assert narrow_enough(rounds(8, 0.002, ratio), target=0.01, floor=6)
        assert not narrow_enough(rounds(8, 0.05, ratio), target=0.01, floor=6)


def test_off_means_the_full_count():
    assert not narrow_enough(rounds(50, 0.0001), target=None, floor=6)


def test_with_a_second_reference():
    r = rounds(6, 0.001)
    r.ref2 = list(r.ref)
    assert narrow_enough(r, target=0.01, floor=6)


def test_wide_intervals_get_more_rounds_up_to_the_ceiling():
    cfg = EvaluationConfig(device="cuda", timing_trials=20, max_timing_rounds=60)
    assert extra_rounds(cfg, 20) == 40
    # the time budget already cut the rounds below timing_trials: no more than it allows
    assert extra_rounds(cfg, 12) == 0
    assert extra_rounds(EvaluationConfig(device="cuda", timing_trials=20, max_timing_rounds=None), 20) == 0
    assert extra_rounds(EvaluationConfig(device="cuda", timing_trials=20, timing_target_halfwidth=None), 20) == 0
    assert extra_rounds(EvaluationConfig(device="cuda", timing_trials=80, max_timing_rounds=60), 80) == 0
    # on a CPU the rounds' noise is the host's other load: no extension
    assert extra_rounds(EvaluationConfig(device="cpu", timing_trials=20, max_timing_rounds=60), 20) == 0


def test_the_estimator_moves_smoothly_between_two_modes():
    """Rounds in two modes (a placement that makes a cuDNN kernel 30 % faster, drawn anew each round):
    one round changing mode moves the median from one mode to the other, the interquartile mean a step."""
    slow, fast = 6.5, 5.0
    before = [slow] * 10 + [fast] * 9
    after = [slow] * 9 + [fast] * 10
    assert median(after) / median(before) < 0.8
    assert 0.96 < central(after) / central(before) < 1.0
    assert central([1.0, 1.0, 1.0, 50.0]) == 1.0  # one slow outlier still does not move it
