"""The request channel to a sandboxed process, with a real process: a request the harness does not
know is answered at once (with its nonce), and the process goes on serving the next one."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import ClassVar

from evaluation.sandbox.protocol import EstimateRequest, Request
from evaluation.sandbox.sandbox import Sandbox
from tests.evaluation.helpers import ROOT


@dataclass(frozen=True)
class FormatDisk(Request):
    op: ClassVar[str] = "format_disk"


def test_a_request_the_harness_does_not_know_is_answered_not_left_to_time_out():
    problem = (ROOT / "problems" / "catalogue" / "level1" / "1_Square_matrix_multiplication.py").read_text()
    with Sandbox(device="cpu", size_scale=1, memory_limit_mb=4096) as sandbox:
        proc = sandbox.spawn("reference", sandbox.write_source("problem.py", problem))
        deadline = time.monotonic() + 120
        assert proc.recv(deadline)["ok"]  # ready
        refused = proc.request(FormatDisk(), time.monotonic() + 20)  # an unanswered request times out
        assert refused["ok"] is False and "format_disk" in refused["error"]
        assert proc.request(EstimateRequest(), deadline)["ok"]
