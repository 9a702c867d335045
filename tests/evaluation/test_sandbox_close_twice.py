"""A sandbox closed twice (a sweep's worker closes again what an interrupt cut short) closes nothing the
second time that it no longer owns: the pipes' descriptor numbers, free after the first close, may by
then be the worker's own files."""

from __future__ import annotations

import contextlib
import os
import time

from evaluation.sandbox.sandbox import Sandbox
from tests.evaluation.helpers import EVAL_PROBLEMS


def test_a_second_close_leaves_the_descriptors_the_worker_opened_since():
    sandbox = Sandbox(device="cpu", size_scale=1, memory_limit_mb=8192)
    try:
        proc = sandbox.spawn(
            "reference", sandbox.write_source("problem.py", (EVAL_PROBLEMS / "add_one.py").read_text())
        )
        assert proc.recv(time.monotonic() + 120)["ok"]  # ready
        pipes = {proc._cmd_w, proc._resp_r}
    finally:
        sandbox.close()
    mine = [os.open(os.devnull, os.O_RDONLY) for _ in range(6)]
    try:
        assert pipes & set(mine), "the freed numbers were not taken again"  # the lowest free number is
        sandbox.close()
        for fd in mine:
            os.fstat(fd)  # EBADF: the second close closed the worker's file
    finally:
        for fd in mine:
            with contextlib.suppress(OSError):
                os.close(fd)
