"""The host-bound rule and the device-time figure (evaluation/phases/host_bound.py), with numbers from the
H200's launch-bound problems (shared/findings/host-bound-timing.md)."""

from __future__ import annotations

import math

import pytest

from evaluation import EvaluationResult
from evaluation.phases.host_bound import report_device_time as report
from evaluation.phases.host_bound import side_range


def test_a_gpu_bound_side_reads_what_it_read():
    # L1 12's kernel: 1.54 ms of GPU work, dispatched in 0.02 ms
    assert side_range(1.54, 1.539, 0.02) == (1.54, 1.54, False)


def test_a_launch_bound_reference_covers_both_processes_of_the_issue():
    # L2 14's reference: 10.5 us of GPU work; one process dispatched in 0.09 ms and read 0.015 ms,
    # another read 0.103 ms: the range from the first covers the second.
    lo, hi, bound = side_range(0.015, 0.0105, 0.09)
    assert bound and lo <= 0.0105 and hi >= 0.103


def _result(speedup: float, interval: tuple[float, float]) -> EvaluationResult:
    return EvaluationResult(status="correct", correct=True, speedup=speedup, speedup_interval=interval)


def test_report_widens_a_host_bound_interval_and_says_why():
    res = _result(1.12, (1.10, 1.14))
    dev = {"reference": [0.0105] * 6, "reference2": [0.0106] * 6, "kernel": [0.0100] * 6}
    disp = {"reference": [0.09] * 6, "reference2": [0.095] * 6, "kernel": [0.012] * 6}
    report(res, dev, disp, [0.015] * 6, [0.0134] * 6, seed=1)
    assert res.device["host_bound"] == {"reference": True, "kernel": False}
    lo, hi = res.speedup_interval
    assert lo <= 1.12 and hi >= 8.0  # call 2's 8.01x of the issue lies inside
    assert res.device["speedup"] == pytest.approx(0.01055 / 0.0100, rel=1e-3)
    assert "host_bound" in {n["code"] for n in res.notes}


def test_report_leaves_a_gpu_bound_interval_alone():
    res = _result(1.77, (1.75, 1.79))
    dev = {"reference": [2.70] * 6, "kernel": [1.53] * 6}
    disp = {"reference": [0.03] * 6, "kernel": [0.02] * 6}
    report(res, dev, disp, [2.705] * 6, [1.54] * 6, seed=1)
    assert res.speedup_interval == (1.75, 1.79)
    assert not res.notes and res.device["host_bound"] == {"reference": False, "kernel": False}
    lo, hi = res.device["speedup_interval"]
    assert lo < 2.70 / 1.53 < hi and hi / lo < 1.03


def test_a_kernel_that_works_on_the_host_gets_no_device_figure():
    # 5 ms of host work per call, 0.01 ms on the GPU: a device time would hide the host's work
    res = _result(0.5, (0.45, 0.55))
    dev = {"reference": [2.5] * 6, "kernel": [0.01] * 6}
    disp = {"reference": [0.03] * 6, "kernel": [5.0] * 6}
    report(res, dev, disp, [2.5] * 6, [5.0] * 6, seed=1)
    assert res.device["speedup"] is None and "off the GPU" in res.device["withheld"]


def test_two_reference_processes_that_differ_widen_the_device_interval_by_as_much():
    res = _result(1.77, (1.75, 1.79))
    dev = {"reference": [2.70] * 6, "reference2": [2.78] * 6, "kernel": [1.53] * 6}
    disp = {"reference": [0.03] * 6, "reference2": [0.03] * 6, "kernel": [0.02] * 6}
    report(res, dev, disp, [2.705] * 6, [1.54] * 6, seed=1)
    term = res.device["process_term"]
    assert term == pytest.approx(2 * math.log(2.78 / 2.70))
    lo, hi = res.device["speedup_interval"]
    assert hi / lo > (1 + term) / (1 - term) * 0.999
    assert res.device["process_ms"] == pytest.approx({"reference": 2.70, "reference2": 2.78, "kernel": 1.53})


def test_a_host_bound_pair_has_a_device_interval_as_wide_as_processes_were_seen_to_differ():
    # L2 14's reference against itself read 0.957 and 1.002 in two evaluations on the H200: each
    # interval covers the other's figure.
    res = _result(1.0, (0.9, 1.1))
    dev = {"reference": [0.01462] * 6, "reference2": [0.01462] * 6, "kernel": [0.01528] * 6}
    disp = {"reference": [0.118] * 6, "reference2": [0.118] * 6, "kernel": [0.097] * 6}
    report(res, dev, disp, [0.03] * 6, [0.03] * 6, seed=1)
    lo, hi = res.device["speedup_interval"]
    assert lo <= 0.957 and hi >= 1.002
