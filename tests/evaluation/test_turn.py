"""evaluate(turn=...): the turn is entered once the sandbox's processes are started and before any
phase; a turn that fails closes the sandbox and is no verdict."""

from __future__ import annotations

import os
from contextlib import contextmanager

import pytest

from evaluation import EvaluationConfig, evaluate
from evaluation import runner as runner_module
from tests.evaluation.helpers import EVAL_PROBLEMS, read, self_kernel

CFG = dict(correctness_trials=2, timing_trials=3, seed=7, timeout_s=120, round_target_s=0.01, cpu_threads=1)


@pytest.fixture
def prepared(monkeypatch):
    """Every Prepared that evaluate() makes, as it is made."""
    made = []
    real = runner_module.prepare

    def recording(*args, **kwargs):
        made.append(real(*args, **kwargs))
        return made[-1]

    monkeypatch.setattr(runner_module, "prepare", recording)
    return made


def test_the_turn_is_held_from_the_started_processes_to_the_end_of_the_evaluation(prepared, monkeypatch):
    seen: dict = {"steps": []}
    real = runner_module.evaluate_prepared

    def measuring(prep, pause=None):
        seen["steps"].append("evaluate")
        return real(prep, pause)

    monkeypatch.setattr(runner_module, "evaluate_prepared", measuring)

    @contextmanager
    def turn():
        (prep,) = prepared
        seen["alive"] = [p.proc is not None and p.proc.poll() is None for p in prep.procs]
        seen["steps"].append("take")
        yield
        seen["steps"].append("leave")

    problem = read(EVAL_PROBLEMS / "add_one.py")
    result = evaluate(problem, self_kernel(problem), EvaluationConfig(**CFG), turn=turn)
    assert result.status == "correct", (result.status, result.error)
    assert seen["alive"] and all(seen["alive"]), seen
    assert seen["steps"] == ["take", "evaluate", "leave"], "the turn is held around the whole evaluation"


def test_a_turn_that_fails_closes_the_sandbox_and_is_no_verdict(prepared):
    @contextmanager
    def turn():
        raise TimeoutError("no turn on this GPU")
        yield  # pragma: no cover

    problem = read(EVAL_PROBLEMS / "add_one.py")
    with pytest.raises(TimeoutError, match="no turn"):
        evaluate(problem, self_kernel(problem), EvaluationConfig(**CFG), turn=turn)
    (prep,) = prepared
    assert all(p.proc.poll() is not None for p in prep.procs), "every process of the sandbox ended"
    assert not os.path.exists(prep.sandbox.root), "the sandbox's folder is removed"
