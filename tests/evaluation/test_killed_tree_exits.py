"""A sandbox's close waits until its killed processes have exited (evaluation/sandbox/process.py,
``wait_exited``). The sandboxed Python is PID 1 behind `unshare --fork`: once `unshare` is reaped it
is no longer the parent's child, and a process holding much memory takes a while to give it back as
it exits. On the GPU the next evaluation loaded beside a killed one's memory and ran out of it (an
H100's self-check: the problem after every large one "crashed", out of memory, in 0.2 s)."""

from __future__ import annotations

import time

from evaluation.sandbox.process import _stat, wait_exited
from evaluation.sandbox.protocol import EstimateRequest
from evaluation.sandbox.sandbox import Sandbox
from tests.evaluation.helpers import ROOT

# Memory the problem's process holds when it is killed: its exit gives back about 2 GB of pages.
HELD = "HELD = bytearray(2 * 2**30)\nfor _i in range(0, len(HELD), 4096):\n    HELD[_i] = 1\n"


def test_close_returns_only_once_the_killed_processes_have_exited():
    problem = (
        (ROOT / "problems" / "catalogue" / "level1" / "1_Square_matrix_multiplication.py").read_text() + "\n" + HELD
    )
    with Sandbox(device="cpu", size_scale=1, memory_limit_mb=8192) as sandbox:
        proc = sandbox.spawn("reference", sandbox.write_source("problem.py", problem))
        deadline = time.monotonic() + 120
        assert proc.recv(deadline)["ok"]  # ready
        assert proc.request(EstimateRequest(), deadline)["ok"]  # the problem imported: its memory held
        pids = [p for p in proc.tree() if p != proc.proc.pid]
        started = {p: found[1] for p in pids if (found := _stat(p)) is not None}
        assert started, "no process of the sandbox's tree was found"
        sandbox.close()
        running = [p for p, t in started.items() if (f := _stat(p)) is not None and f[0] != "Z" and f[1] == t]
        assert running == [], f"close returned while {running} still ran"
        assert proc.unexited == []


def test_wait_exited_waits_for_running_processes_and_not_for_zombies_nor_reused_pids():
    states = {1: iter([("R", 5), ("R", 5), None]), 2: iter([("Z", 6)]), 3: iter([("S", 99)])}
    calls = {1: 0}

    def stat(pid):
        if pid == 1:
            calls[1] += 1
        return next(states[pid], None)

    assert wait_exited({1: 5, 2: 6, 3: 7}, timeout_s=5, stat=stat) == []
    assert calls[1] == 3, "returned before the running process had exited"


def test_wait_exited_gives_up_and_says_which_still_run():
    t0 = time.monotonic()
    assert wait_exited({4: 1}, timeout_s=0.1, stat=lambda pid: ("D", 1)) == [4]
    assert time.monotonic() - t0 < 2
