"""An interrupted sweep closes what its GPU workers started ahead (evaluation/sweep.py): a sandbox's
processes live in their own session, which the interrupt never reaches, and once held the GPU's
memory into the next call on the host."""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import time
from types import SimpleNamespace

import pytest

from evaluation import sweep
from evaluation.sweep import Task


class _Queue:
    def __init__(self, items):
        self.items = list(items)
        self.put_items = []

    def get(self):
        return self.items.pop(0)

    def put(self, item):
        self.put_items.append(item)


def _prepared(closed: list[str], name: str):
    return SimpleNamespace(name=name, close=lambda: closed.append(name))


def test_a_worker_stopped_mid_evaluation_closes_the_sandbox_it_prepared_ahead(monkeypatch):
    closed: list[str] = []
    handlers = {}
    monkeypatch.setattr(sweep.signal, "signal", lambda sig, handler: handlers.__setitem__(sig, handler))
    monkeypatch.setattr(sweep, "_prepare", lambda task, cfg: _prepared(closed, task.problem))

    def evaluate_prepared(prep):
        raise KeyboardInterrupt  # the stop, while the first evaluation runs

    monkeypatch.setattr(sweep, "evaluate_prepared", evaluate_prepared)
    tasks = _Queue([Task(1, "1_A", None), Task(1, "2_B", None), Task(1, "3_C", None), None])
    with pytest.raises(KeyboardInterrupt):
        sweep._worker("cpu", [], [], SimpleNamespace(), tasks, _Queue([]))
    # 1_A was being evaluated: closed again (run_started's own close may have been cut short by the
    # stop); 2_B waited, started ahead.
    assert closed == ["1_A", "2_B"]
    assert handlers == {signal.SIGINT: sweep._stopped, signal.SIGTERM: sweep._stopped}


def test_without_a_stop_nothing_started_ahead_is_left(monkeypatch):
    closed: list[str] = []
    monkeypatch.setattr(sweep.signal, "signal", lambda sig, handler: None)
    monkeypatch.setattr(sweep, "_prepare", lambda task, cfg: _prepared(closed, task.problem))
    monkeypatch.setattr(sweep, "evaluate_prepared", lambda prep: SimpleNamespace(to_dict=lambda: {"status": "correct"}))
    results = _Queue([])
    sweep._worker("cpu", [], [], SimpleNamespace(), _Queue([Task(1, "1_A", None), Task(1, "2_B", None), None]), results)
    assert [o.task.problem for o in results.put_items] == ["1_A", "2_B"] and closed == []


def _closing_worker(marker: str, stubborn: bool) -> None:
    signal.signal(signal.SIGINT, sweep._stopped)
    signal.signal(signal.SIGTERM, sweep._stopped)
    try:
        with open(marker + ".ready", "w"):
            pass
        while True:
            time.sleep(0.05)
    finally:
        time.sleep(0.3)  # closing takes a moment; a second stop meanwhile must not cut it short
        with open(marker, "w") as fh:
            fh.write("closed")
        while stubborn:
            time.sleep(0.05)


def _started(p, marker: str) -> None:
    """Wait until the worker has its handlers (a signal before them ends it some other way)."""
    deadline = time.monotonic() + 60
    while not os.path.exists(marker + ".ready"):
        assert p.is_alive() and time.monotonic() < deadline
        time.sleep(0.02)


def test_the_sweep_stops_its_workers_and_lets_them_close_even_after_a_ctrl_c_reached_them(tmp_path, monkeypatch):
    ctx = mp.get_context("fork")
    marker = str(tmp_path / "closed")
    p = ctx.Process(target=_closing_worker, args=(marker, False), daemon=True)
    p.start()
    _started(p, marker)
    os.kill(p.pid, signal.SIGINT)  # the group's Ctrl-C; then the sweep's own stop at once
    sweep._stop_workers([p])
    assert not p.is_alive() and open(marker).read() == "closed"


def test_a_worker_that_does_not_end_is_killed_after_the_wait(tmp_path, monkeypatch):
    monkeypatch.setattr(sweep, "STOP_WAIT_S", 1.0)
    ctx = mp.get_context("fork")
    marker = str(tmp_path / "closed")
    p = ctx.Process(target=_closing_worker, args=(marker, True), daemon=True)
    p.start()
    _started(p, marker)
    t0 = time.monotonic()
    sweep._stop_workers([p])
    assert not p.is_alive() and p.exitcode == -signal.SIGKILL and time.monotonic() - t0 < 4
