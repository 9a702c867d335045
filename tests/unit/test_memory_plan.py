"""The memory plan (evaluation/phases/memory_plan.py) and what is kept of a problem
(evaluation/phases/problem_facts.py). Processes that share one card (``fit_the_card``): a problem
too large for three processes of it on the card's free memory is timed with one reference process,
and says so; one that fits keeps its second reference process. A problem's sizes and the work of its
forward are asked for once per problem, scale (and precision); the card's free memory every time.
(No GPU here: the reference process's figures are given; on an H100, three processes of KernelBench
level 1's 6 GB problems ran out of memory.)"""

from __future__ import annotations

import json
import types
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from evaluation.instruments import phase as instruments_phase
from evaluation.phases import memory_plan
from evaluation.phases.memory_plan import GPU_WORKING_SETS, fit_the_card
from evaluation.phases.problem_facts import FACTS_FOLDER, ProblemFacts, problem_digest
from evaluation.phases.session import Abort
from evaluation.results.types import EvaluationResult
from evaluation.sandbox.protocol import EstimateReply, InstrumentReply

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
    fit_the_card(pair, _estimate(6, 6, 77))  # LeakyReLU at KernelBench's sizes on an H100
    assert pair.ref2 is None and second.closed
    assert pair.res.environment["reference_processes"] == 1
    assert [n["code"] for n in pair.res.notes] == ["one_reference_process"]
    assert "77.0 GB free" in pair.res.notes[0]["message"]


def test_a_problem_that_fits_keeps_both_reference_processes():
    for inputs_gb, free_gb in ((4, 77), (6, 139)):  # 4 GB on an H100; 6 GB on an H200
        pair = _Pair()
        fit_the_card(pair, _estimate(inputs_gb, inputs_gb, free_gb))
        assert pair.ref2 is not None and not pair.ref2.closed, (inputs_gb, free_gb)
        assert pair.res.notes == []


def test_unknown_sizes_change_nothing():
    pair = _Pair()
    fit_the_card(pair, EstimateReply(ok=True, device_free_bytes=int(10 * GB)))  # inputs not found on meta
    assert pair.ref2 is not None
    pair = _Pair()
    fit_the_card(pair, _estimate(6, 6, free_gb=-1 / GB))  # no figure of the card
    assert pair.ref2 is not None


def test_the_bound_is_three_processes_of_the_working_sets():
    sets_gb = 4.0
    free_gb = 3 * GPU_WORKING_SETS * sets_gb
    pair = _Pair()
    fit_the_card(pair, _estimate(sets_gb / 2, sets_gb / 2, free_gb))
    assert pair.ref2 is not None
    fit_the_card(pair, _estimate(sets_gb / 2, sets_gb / 2, free_gb - 0.1))
    assert pair.ref2 is None


class _Asking:
    """A pair whose reference process answers every request with ``reply``, and records them."""

    cache = ""  # the build cache's root of every pair made (the facts fixture's folder)

    def __init__(self, device: str, reply, scale: int = 1, problem: str = "class Model: ...") -> None:
        self.cfg = types.SimpleNamespace(
            device=device, size_scale=scale, memory_limit_mb=16384, precision="fp32", build_cache_dir=self.cache
        )
        self.res = EvaluationResult()
        self.ref, self.ref2, self.reply, self.asked = object(), None, reply, []
        self.problem_digest = problem_digest(problem)

    def request(self, proc, req, cls):
        self.asked.append(req)
        return self.reply


@pytest.fixture
def facts(monkeypatch, tmp_path):
    monkeypatch.setattr(_Asking, "cache", str(tmp_path))
    kept = ProblemFacts(capacity=4)
    monkeypatch.setattr(memory_plan, "FACTS", kept)
    monkeypatch.setattr(instruments_phase, "FACTS", kept)
    return kept


def test_a_problems_sizes_are_asked_for_once_and_the_cards_free_memory_every_time(facts, monkeypatch):
    first = _Asking("cuda", _estimate(1, 1, free_gb=70))
    memory_plan.check_memory(first)
    assert [r.sizes for r in first.asked] == [True] and first.res.environment["input_mb"] == 1024.0
    again = _Asking("cuda", EstimateReply(ok=True, device_free_bytes=int(50 * GB)))  # no sizes in the reply
    seen = []
    monkeypatch.setattr(memory_plan, "fit_the_card", lambda pair, est: seen.append(est))
    memory_plan.check_memory(again)
    assert [r.sizes for r in again.asked] == [False], "the card's free memory only"
    assert seen[0].input_bytes == GB and seen[0].device_free_bytes == 50 * GB
    assert again.res.environment["input_mb"] == 1024.0
    cpu = _Asking("cpu", _estimate(9, 9, free_gb=-1 / GB))
    memory_plan.check_memory(cpu)
    assert cpu.asked == [], "the CPU needs nothing more"
    other_scale = _Asking("cpu", _estimate(4, 4, free_gb=-1 / GB), scale=2)
    memory_plan.check_memory(other_scale)
    assert len(other_scale.asked) == 1 and other_scale.res.environment["input_mb"] == 4096.0
    other_problem = _Asking("cpu", _estimate(2, 2, free_gb=-1 / GB), problem="class Model: pass")
    memory_plan.check_memory(other_problem)
    assert len(other_problem.asked) == 1 and other_problem.res.environment["input_mb"] == 2048.0


def test_a_refusal_is_kept_and_a_failed_estimate_is_not(facts):
    big = _Asking("cpu", _estimate(20, 20, free_gb=-1 / GB))
    with pytest.raises(Abort, match="more than memory_limit_mb"):
        memory_plan.check_memory(big)
    again = _Asking("cpu", _estimate(20, 20, free_gb=-1 / GB))
    with pytest.raises(Abort, match="more than memory_limit_mb"):
        memory_plan.check_memory(again)  # the kept sizes refuse it as the first did
    assert again.asked == []
    failing = _Asking("cpu", EstimateReply(ok=False, error="boom"), problem="fails")
    failing.reference_failed = lambda est: Abort("runtime_error", f"reference failed: {est.error}")
    with pytest.raises(Abort, match="boom"):
        memory_plan.check_memory(failing)
    assert facts.get(failing, "sizes") is None


def test_the_work_of_one_forward_is_counted_once_per_problem_and_precision(facts):
    work = InstrumentReply(ok=True, data={"input_bytes": 8, "param_bytes": 0, "output_bytes": 8})
    first, again = _Asking("cpu", work), _Asking("cpu", work)
    assert instruments_phase._reference_work(first)["input_bytes"] == 8 and len(first.asked) == 1
    assert instruments_phase._reference_work(again)["input_bytes"] == 8 and again.asked == []
    half = _Asking("cpu", work)
    half.cfg.precision = "bf16"
    instruments_phase._reference_work(half)
    assert len(half.asked) == 1


def test_another_process_finds_the_facts_on_disk_and_checks_them(facts, monkeypatch):
    memory_plan.check_memory(_Asking("cpu", _estimate(1, 1, free_gb=-1 / GB)))
    monkeypatch.setattr(memory_plan, "FACTS", ProblemFacts())  # a fresh worker process: nothing in memory
    fresh = _Asking("cpu", _estimate(3, 3, free_gb=-1 / GB))
    memory_plan.check_memory(fresh)
    assert fresh.asked == [] and fresh.res.environment["input_mb"] == 1024.0
    (path,) = list((Path(_Asking.cache) / FACTS_FOLDER).iterdir())
    path.write_text(json.dumps({"1|sizes": {"input_bytes": "a lot", "param_bytes": 0, "output_bytes": 0}}))
    monkeypatch.setattr(memory_plan, "FACTS", ProblemFacts())
    doubted = _Asking("cpu", _estimate(3, 3, free_gb=-1 / GB))
    memory_plan.check_memory(doubted)
    assert len(doubted.asked) == 1 and doubted.res.environment["input_mb"] == 3072.0
    assert json.loads(path.read_text())["1|sizes"]["input_bytes"] == 3 * GB


def test_the_last_facts_are_kept_and_a_pair_without_a_problem_keeps_none(tmp_path, monkeypatch):
    monkeypatch.setattr(_Asking, "cache", str(tmp_path / "not-made" / "deeper"))
    kept = ProblemFacts(capacity=2)
    pairs = [_Asking("cpu", None, problem=name) for name in ("a", "b", "c")]
    for pair in pairs:
        kept.put(pair, "sizes", {"digest": pair.problem_digest})
    kept._kept.clear()  # noqa: SLF001 - memory gone: the facts come back from disk
    assert kept.get(pairs[0], "sizes") == {"digest": pairs[0].problem_digest}
    assert len(kept._kept) == 1  # noqa: SLF001
    anonymous = _Asking("cpu", None)
    anonymous.problem_digest = ""
    kept.put(anonymous, "sizes", {"x": 1})
    assert kept.get(anonymous, "sizes") is None
