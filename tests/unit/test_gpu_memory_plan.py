"""Processes that share one card (evaluation/runner.py, ``_fit_the_card``): a problem too large for
three processes of it on the card's free memory is timed with one reference process, and says so;
one that fits keeps its second reference process. (No GPU here: the reference process's figures are
given; on an H100, three processes of KernelBench level 1's 6 GB problems ran out of memory.)"""

from __future__ import annotations

from dataclasses import dataclass, field

from evaluation.results.types import EvaluationResult
from evaluation.runner import GPU_WORKING_SETS, _fit_the_card
from evaluation.sandbox.protocol import EstimateReply

GB = 2**30


@dataclass
class _Process:
    closed: bool = False

    def close(self, graceful: bool = True) -> None:
        self.closed = True


@dataclass
class _Pair:
    ref2: _Process | None = field(default_factory=_Process)
    res: EvaluationResult = field(default_factory=EvaluationResult)


def _estimate(inputs_gb: float, outputs_gb: float, free_gb: float) -> EstimateReply:
    return EstimateReply(
        ok=True,
        input_bytes=int(inputs_gb * GB),
        output_bytes=int(outputs_gb * GB),
        param_bytes=0,
        device_free_bytes=int(free_gb * GB),
    )


def test_a_problem_three_processes_cannot_hold_runs_with_one_reference_process():
    pair = _Pair()
    second = pair.ref2
    _fit_the_card(pair, _estimate(6, 6, 77))  # LeakyReLU at KernelBench's sizes on an H100
    assert pair.ref2 is None and second.closed
    assert pair.res.environment["reference_processes"] == 1
    assert [n["code"] for n in pair.res.notes] == ["one_reference_process"]
    assert "77.0 GB free" in pair.res.notes[0]["message"]


def test_a_problem_that_fits_keeps_both_reference_processes():
    for inputs_gb, free_gb in ((4, 77), (6, 139)):  # 4 GB on an H100; 6 GB on an H200
        pair = _Pair()
        _fit_the_card(pair, _estimate(inputs_gb, inputs_gb, free_gb))
        assert pair.ref2 is not None and not pair.ref2.closed, (inputs_gb, free_gb)
        assert pair.res.notes == []


def test_unknown_sizes_change_nothing():
    pair = _Pair()
    _fit_the_card(pair, EstimateReply(ok=True, device_free_bytes=int(10 * GB)))  # inputs not found on meta
    assert pair.ref2 is not None
    pair = _Pair()
    _fit_the_card(pair, _estimate(6, 6, free_gb=-1 / GB))  # no figure of the card
    assert pair.ref2 is not None


def test_the_bound_is_three_processes_of_the_working_sets():
    sets_gb = 4.0
    free_gb = 3 * GPU_WORKING_SETS * sets_gb
    pair = _Pair()
    _fit_the_card(pair, _estimate(sets_gb / 2, sets_gb / 2, free_gb))
    assert pair.ref2 is not None
    _fit_the_card(pair, _estimate(sets_gb / 2, sets_gb / 2, free_gb - 0.1))
    assert pair.ref2 is None
