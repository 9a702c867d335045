"""A kernel that fails in any way ends with the right status and a one-line reason; the caller
carries on."""

from __future__ import annotations

import os
import time

import pytest

from evaluation import INFRASTRUCTURE_ERROR
from evaluation.sandbox.host_errors import BUSY_EVALUATION, CARD_FULL, counts_against_host
from tests.evaluation.helpers import EVAL_PROBLEMS, run
from tests.integration.fault_report import record

ADD_ONE = EVAL_PROBLEMS / "add_one.py"
HEAD = "import os, sys, time, ctypes\nimport torch\nimport torch.nn as nn\n"


def kernel(body: str, module: str = "") -> str:
    return (
        HEAD
        + module
        + f"""
class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
{body}
"""
    )


CASES = {
    "correct": (kernel("        return x + 1.0"), "correct", None),
    "wrong_values": (kernel("        return x + 1.01"), "incorrect", "outside tolerance"),
    "wrong_shape": (kernel("        return (x + 1.0)[:-1]"), "incorrect", "shape"),
    "nan_output": (kernel("        y = x + 1.0\n        y[0, 0] = float('nan')\n        return y"), "incorrect", "NaN"),
    "syntax_error": ("class ModelNew(:\n", "compile_error", "SyntaxError"),
    "no_modelnew": (HEAD + "class Other(nn.Module):\n    pass\n", "compile_error", "ModelNew"),
    "import_raises": (HEAD + "raise ImportError('no such extension')\n", "compile_error", "no such extension"),
    "forward_raises": (kernel("        raise ValueError('boom in forward')"), "runtime_error", "boom in forward"),
    "segfault": (kernel("        ctypes.string_at(0)\n        return x"), "crashed", "SIGSEGV"),
    "os_exit": (kernel("        os._exit(3)"), "crashed", "status 3"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_status(case):
    src, status, fragment = CASES[case]
    res = run(ADD_ONE, src, correctness_trials=2, timing_trials=2 if status == "correct" else 0)
    assert res.status == status, (res.error, res.log[-2000:])
    assert res.correct == (status == "correct")
    if fragment:
        assert fragment in (res.error or ""), res.error
        assert "\n" not in res.error
    if status == "correct":
        assert res.speedup is not None and res.speedup_interval is not None
        assert res.compiled and res.trials_passed == res.trials_total == 2
    else:
        assert res.speedup is None
    if status in ("compile_error",):
        assert not res.compiled
    # Issue 30: "uses only PyTorch operators" is a review note about code that ran, not about a
    # kernel that did not even build or load.
    assert ("pytorch_only" in {n["code"] for n in res.notes}) == res.compiled


@pytest.fixture
def host_load(monkeypatch):
    """Pins the host's load as the runner reads it (its timeout rule: evaluation.runner): a hang on a
    host loaded by others is the host's, so the hang tests say which host they run on."""

    def pin(per_core: float) -> None:
        monkeypatch.setattr(os, "getloadavg", lambda: (per_core * (os.cpu_count() or 1), 0.0, 0.0))

    return pin


def test_hang_times_out(host_load):
    host_load(0.0)
    t0 = time.monotonic()
    res = run(ADD_ONE, kernel("        while True:\n            pass"), timeout_s=15, timing_trials=0)
    if res.status == INFRASTRUCTURE_ERROR and "failed to start" in (res.error or ""):
        # The host took the whole budget to start the processes, before any of the kernel's code ran:
        # no verdict (evaluation.sandbox.host_errors), and nothing this test can say about a hang.
        pytest.skip(f"the host was too slow to start the sandbox within 15 s: {res.error}")
    assert res.status == "timeout"
    assert time.monotonic() - t0 < 40


def test_memory_limit():
    body = "        big = torch.ones(int(3e9) // 4)\n        return x + 1.0 + big[0] * 0"
    res = run(ADD_ONE, kernel(body), memory_limit_mb=1024, timing_trials=0)
    assert res.status == "crashed", (res.error, res.log[-1000:])
    assert "memory" in res.error


def test_hang_on_a_loaded_host_is_the_hosts_not_a_verdict(host_load):
    host_load(64.0)
    res = run(ADD_ONE, kernel("        while True:\n            pass"), timeout_s=15, timing_trials=0)
    if "failed to start" in (res.error or ""):
        pytest.skip(f"the host was too slow to start the sandbox within 15 s: {res.error}")
    assert res.status == INFRASTRUCTURE_ERROR, (res.status, res.error)  # retried, never a cached `timeout`
    assert (res.error or "").startswith(f"{BUSY_EVALUATION} the host was loaded"), res.error
    assert not counts_against_host(res.error or "")
    record("3. a kernel's hang on a loaded host", status=res.status, error=(res.error or "")[:120])


def test_hang_while_timing_is_a_timeout_not_a_speedup(host_load):
    host_load(0.0)
    module = "_CALLS = [0]\n"
    body = "        _CALLS[0] += 1\n        if _CALLS[0] > 3:\n            time.sleep(3600)\n        return x + 1.0"
    res = run(ADD_ONE, kernel(body, module), correctness_trials=2, timing_trials=3, timeout_s=20)
    assert res.status == "timeout"
    assert not res.correct and res.speedup is None and res.trials_passed == 2


def test_reference_out_of_the_cards_memory_is_no_verdict(tmp_path):
    """On an 80 GB card the reference of a problem with 8 GB inputs ran out of memory while timing
    beside the kernel's process: that was a `runtime_error` verdict against an honest kernel (and the
    reference against itself). The trusted reference's out-of-memory is the host's: no verdict, and
    no mark against the host either (a kernel that fills the card can cause it)."""
    problem = tmp_path / "ref_runs_out.py"
    problem.write_text(
        HEAD
        + "CALLS = [0]\n\n\nclass Model(nn.Module):\n    def forward(self, x):\n        CALLS[0] += 1\n"
        + "        if CALLS[0] > 6:  # past the correctness trials: in the timing phase\n"
        + "            raise torch.cuda.OutOfMemoryError('CUDA out of memory. Tried to allocate 8.00 GiB.')\n"
        + "        return x + 1.0\n\n\ndef get_inputs():\n    return [torch.randn(64, 64)]\n\n\n"
        + "def get_init_inputs():\n    return []\n"
    )
    res = run(problem, kernel("        return x + 1.0"), correctness_trials=2, timing_trials=2)
    assert res.status == INFRASTRUCTURE_ERROR, (res.status, res.error)
    assert (res.error or "").startswith(f"{CARD_FULL} in the reference process"), res.error
    assert "while timing" in (res.error or "") and "\n" not in (res.error or "")
    assert not counts_against_host(res.error or "")
