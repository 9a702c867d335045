"""A sandboxed process opens the device apart from its start: started ahead of its GPU turn it only
imports torch, and opens the device (CUDA's context, events, the spin's calibration) when asked,
or at the first request, before any of the kernel's code runs. On the CPU nothing is opened, but
the order is the same and is what these tests read."""

from __future__ import annotations

import time

from evaluation.sandbox.protocol import EstimateRequest, OpenDeviceReply, OpenDeviceRequest, parse
from evaluation.sandbox.sandbox import Sandbox
from tests.evaluation.helpers import ROOT

PROBLEM = ROOT / "problems" / "catalogue" / "level1" / "3_GELU.py"


def _started(sandbox: Sandbox):
    proc = sandbox.spawn("reference", sandbox.write_source("problem.py", PROBLEM.read_text()))
    assert proc.recv(time.monotonic() + 120)["ok"]  # ready: torch imported
    return proc


def test_a_started_process_opens_the_device_only_when_asked():
    with Sandbox(device="cpu", size_scale=1, memory_limit_mb=4096) as sandbox:
        proc = _started(sandbox)
        first = parse(OpenDeviceReply, proc.request(OpenDeviceRequest(), time.monotonic() + 60))
        again = parse(OpenDeviceReply, proc.request(OpenDeviceRequest(), time.monotonic() + 60))
    assert first.ok and first.opened_now
    assert again.ok and not again.opened_now  # once


def test_the_first_request_opens_the_device_when_none_asked():
    with Sandbox(device="cpu", size_scale=1, memory_limit_mb=4096) as sandbox:
        proc = _started(sandbox)
        assert proc.request(EstimateRequest(), time.monotonic() + 60)["ok"]
        late = parse(OpenDeviceReply, proc.request(OpenDeviceRequest(), time.monotonic() + 60))
    assert late.ok and not late.opened_now
