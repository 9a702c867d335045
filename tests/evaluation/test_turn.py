"""evaluate(turn=...): the turn is entered once the sandbox's processes are started and the kernel's
build entry is locked, before any phase; a turn that fails closes the sandbox, frees the entry and is
no verdict."""

from __future__ import annotations

import os
import threading
import time
from contextlib import contextmanager

import pytest

from evaluation import EvaluationConfig, evaluate
from evaluation import runner as runner_module
from evaluation.builds.stage import build_dir_for
from tests.evaluation.helpers import EVAL_PROBLEMS, read, self_kernel

CFG = dict(correctness_trials=2, timing_trials=3, seed=7, timeout_s=120, round_target_s=0.01, cpu_threads=1)


@pytest.fixture
def prepared(monkeypatch):
    """Every sandbox that evaluate() starts (``runner.Started``: its processes), as it is started."""
    made = []
    real = runner_module.start_sandbox

    def recording(*args, **kwargs):
        made.append(real(*args, **kwargs))
        return made[-1]

    monkeypatch.setattr(runner_module, "start_sandbox", recording)
    return made


def test_the_turn_is_held_from_the_started_processes_to_the_end_of_the_evaluation(prepared, monkeypatch):
    seen: dict = {"steps": []}
    real = runner_module.run_started

    def measuring(*args, **kwargs):
        seen["steps"].append("evaluate")
        return real(*args, **kwargs)

    monkeypatch.setattr(runner_module, "run_started", measuring)

    @contextmanager
    def turn():
        (started,) = prepared
        seen["alive"] = [p.proc is not None and p.proc.poll() is None for p in started.procs]
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
    (started,) = prepared
    assert all(p.proc.poll() is not None for p in started.procs), "every process of the sandbox ended"
    assert not os.path.exists(started.sandbox.root), "the sandbox's folder is removed"


def test_the_kernels_entry_is_locked_before_the_turn_is_taken(prepared):
    """A follow-up holds its kernel's entry while it gives the turn up between its steps: an
    evaluation of the same kernel that took the turn first and then waited for the entry would wait
    for it for ever (two workers on one GPU did). So the entry comes first."""
    cfg = EvaluationConfig(**CFG)
    problem = read(EVAL_PROBLEMS / "add_one.py")
    kernel = self_kernel(problem)
    seen = {}

    @contextmanager
    def turn():
        other = build_dir_for(kernel, cfg)
        seen["entry_free"] = other.lock(wait=False)
        other.unlock()
        yield

    result = evaluate(problem, kernel, cfg, turn=turn)
    assert result.status == "correct", (result.status, result.error)
    assert seen == {"entry_free": False}, "the evaluation held its entry when it took the turn"


def test_an_evaluation_waiting_for_its_entry_does_not_take_the_turn(prepared):
    cfg = EvaluationConfig(**CFG)
    problem = read(EVAL_PROBLEMS / "add_one.py")
    kernel = self_kernel(problem)
    holder = build_dir_for(kernel, cfg)  # the follow-up of the same kernel, between two steps
    assert holder.lock(wait=False)
    released = threading.Event()

    def release_later():
        while not prepared:  # the evaluation's processes are started: it is about to ask for its entry
            time.sleep(0.01)
        time.sleep(0.5)
        released.set()
        holder.unlock()

    threading.Thread(target=release_later, daemon=True).start()
    taken_after_release = []

    @contextmanager
    def turn():
        taken_after_release.append(released.is_set())
        yield

    result = evaluate(problem, kernel, cfg, turn=turn)
    assert result.status == "correct", (result.status, result.error)
    assert taken_after_release == [True], "the turn waited until the entry was free"
    assert result.timings_s["build_wait"] >= 0.3, result.timings_s


def test_a_turn_that_fails_leaves_the_entry_unlocked(prepared):
    @contextmanager
    def turn():
        raise TimeoutError("no turn on this GPU")
        yield  # pragma: no cover

    cfg = EvaluationConfig(**CFG)
    problem = read(EVAL_PROBLEMS / "add_one.py")
    with pytest.raises(TimeoutError):
        evaluate(problem, self_kernel(problem), cfg, turn=turn)
    other = build_dir_for(self_kernel(problem), cfg)
    assert other.lock(wait=False), "the entry is free again"
    other.unlock()
