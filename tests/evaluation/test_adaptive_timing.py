"""The adaptive stop of the timing rounds: on the interval's width only, with a floor."""

from __future__ import annotations

import math
import random

from evaluation.phases.host_bound import DEVICE_HOST_BOUND_SPREAD
from evaluation.phases.timing import Rounds, extra_rounds, narrow_enough
from evaluation.results.stats import central, median
from evaluation.results.types import EvaluationConfig


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


def _host_bound_rounds(n: int, event_noise: float, device_noise: float, seed: int = 0) -> Rounds:
    """A launch-bound pair: 15 us of GPU work each side, the reference's host takes 90 us to queue
    it (host-bound), the events noisy as processes dispatch differently, the device times quiet."""
    rng = random.Random(seed)
    r = rounds(n, event_noise, ratio=1.2, seed=seed)
    r.dev = {
        "reference": [0.015 * (1 + rng.gauss(0, device_noise)) for _ in range(n)],
        "kernel": [0.015 * (1 + rng.gauss(0, device_noise)) for _ in range(n)],
    }
    r.dispatch = {"reference": [0.09] * n, "kernel": [0.02] * n}
    r.ref = [0.018 * x for x in r.ref]
    r.ker = [0.015 * x for x in r.ker]
    return r


def test_a_host_bound_pair_stops_when_its_device_times_are_narrow():
    # Its KernelBench interval is widened to what another process reads anyway: rounds that narrow
    # it only hold the GPU.
    assert narrow_enough(_host_bound_rounds(6, 0.3, 0.002), target=0.01, floor=6)
    assert not narrow_enough(_host_bound_rounds(6, 0.3, 0.05), target=0.01, floor=6)
    assert not narrow_enough(_host_bound_rounds(5, 0.3, 0.002), target=0.01, floor=6)  # the floor holds


def test_a_pair_that_is_not_host_bound_is_judged_on_its_timed_calls():
    noisy_calls = _host_bound_rounds(6, 0.3, 0.002)
    noisy_calls.dispatch = {"reference": [0.02] * 6, "kernel": [0.02] * 6}  # queued well within the slack
    assert not narrow_enough(noisy_calls, target=0.01, floor=6)
    # Quiet timed calls, noisy device times: the timed calls decide, so it stops.
    quiet_calls = _host_bound_rounds(6, 0.001, 0.05)
    quiet_calls.dispatch = {"reference": [0.02] * 6, "kernel": [0.02] * 6}
    assert narrow_enough(quiet_calls, target=0.01, floor=6)


def test_host_bound_device_rounds_need_only_half_the_spread_the_report_adds():
    # The device figure's interval is widened by DEVICE_HOST_BOUND_SPREAD a side once a side is
    # host-bound; rounds narrower than half that would hold the GPU for nothing.
    r = _host_bound_rounds(6, 0.3, 0.02)
    logs = [math.log(a / b) for a, b in zip(r.dev["reference"], r.dev["kernel"], strict=True)]
    mean = sum(logs) / 6
    half_width = 1.96 * math.sqrt(sum((x - mean) ** 2 for x in logs) / 5) / math.sqrt(6)
    assert 0.01 < half_width <= DEVICE_HOST_BOUND_SPREAD / 2  # wider than the target, within half the spread
    assert narrow_enough(r, target=0.01, floor=6)
    assert narrow_enough(r, target=0.04, floor=6)  # a wider target stays the target
    assert not narrow_enough(_host_bound_rounds(6, 0.3, 0.05), target=0.01, floor=6)
