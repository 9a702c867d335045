"""A kernel cannot move its own time: whatever reaches the harness's clock inside the kernel's
process, the parent's clock bounds what that process reports, and the harness says what the
kernel's code did to it (evaluation.child.harness_guard), however its source spells it."""

from __future__ import annotations

import pytest

from tests.adversarial.clock_kernels import CLOSURE_ONE_SHOT, kernel
from tests.evaluation.helpers import ADV_PROBLEMS, read, run, self_kernel

MATMUL = ADV_PROBLEMS / "matmul.py"
#: Few rounds: each evaluation holds this shared 2-core box for tens of seconds.
FAST = {"timing_trials": 6, "min_timing_rounds": 6, "correctness_trials": 2, "instruments": frozenset()}


def codes(res) -> set[str]:
    return {f["code"] for f in res.flags}


def test_the_probes_frame_walk_is_caught_and_its_time_is_the_parents():
    res = run(MATMUL, kernel("frames"), **FAST)
    assert res.correct, res.error
    assert res.speedup < 2.0, (res.speedup, res.kernel_ms, codes(res))  # the same work as the reference: ~1x
    assert "harness_memory_access" in codes(res), res.flags  # sys._getframe from the kernel's code, however spelled
    assert codes(res) & {"timing_mismatch", "patched_timer"}, res.flags
    # The harness's layer off: the kernel swaps the clock, and the parent's clock alone catches it.
    alone = run(MATMUL, kernel("frames"), disable_defences={"harness_guard"}, **FAST)
    assert "timing_mismatch" in codes(alone) and alone.speedup < 2.0, (codes(alone), alone.speedup)
    # Neither layer: the lie goes through (what a public probe scored on the CPU board).
    both = run(MATMUL, kernel("frames"), disable_defences={"harness_guard", "parent_clock"}, **FAST)
    assert both.speedup > 3.0, both.speedup


@pytest.mark.parametrize("finder", ["inspect", "gc_referrers", "ctypes", "thread"])
def test_other_ways_to_the_harness_are_caught(finder):
    res = run(MATMUL, kernel(finder), **FAST)
    assert res.correct, res.error
    assert res.speedup < 2.0, (finder, res.speedup, res.kernel_ms, codes(res))
    assert "harness_memory_access" in codes(res), res.flags
    assert codes(res) & {"timing_mismatch", "patched_timer"}, res.flags


def test_a_clock_swapped_for_one_reading_and_put_back_is_caught():
    # The harness's guard sees the swap (``patched_timer``), and then no figure of the kernel's own
    # clock is believed above the parent's; on a quiet host the parent's margin flags it as well,
    # but on a starved one (as CI's can be) the margin grows past what this swap hides.
    res = run(MATMUL, CLOSURE_ONE_SHOT, **FAST)
    assert res.correct, res.error
    assert codes(res) & {"timing_mismatch", "patched_timer"}, (res.flags, res.kernel_ms)
    assert res.speedup < 2.0, (res.speedup, res.kernel_ms, codes(res))


def test_an_honest_kernel_that_uses_frames_through_the_standard_library_is_not_flagged():
    honest = (
        self_kernel(read(MATMUL))
        .replace(
            "import torch\n",
            "import collections, logging, typing\nimport torch\nP = collections.namedtuple('P', 'a b')\n"
            "T = typing.TypeVar('T')\n",
            1,
        )
        .replace(
            "        return torch.relu(a @ b)",
            "        logging.getLogger('k').debug('x')\n        P(1, 2)\n        return torch.relu(a @ b)",
        )
    )
    assert "namedtuple" in honest and "logging.getLogger" in honest
    res = run(MATMUL, honest, **FAST)
    assert res.correct, res.error
    assert not codes(res) & {"harness_memory_access", "patched_timer"}, res.flags  # the audit hook's findings
    if "timing_mismatch" in codes(res):
        # The parent's clock is a measurement: on CI's 2-core machine, three test processes beside it,
        # this kernel's process was once starved against its reference (0.37x, where they read alike
        # on a quiet host) and its quietest rounds drew 0.19 ms per call more than the reference's,
        # past the evaluation's own retake. A guard that hid time in this kernel's calls would hide it
        # in every evaluation: a second one on a host that is as loaded by chance must be clean.
        again = run(MATMUL, honest, **FAST)
        assert "timing_mismatch" not in codes(again), (res.flags, again.flags, res.speedup, again.speedup)
