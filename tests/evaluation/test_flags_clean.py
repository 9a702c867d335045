"""A flag accuses the kernel: what torch does to itself is no patch of the kernel's.

torch replaces ``torch.manual_seed`` with a dynamo-disabled wrapper the first time ``torch._dynamo``
is imported (by the profiler, by ``torch.compile``, by a kernel that only imports it). On the H200
that raised ``reference_patched`` on most fast kernels. The wrapper torch installs is recognised by
its code, globals and closure; a look-alike made by a kernel is not.
"""

from __future__ import annotations

from tests.evaluation.helpers import ADV_PROBLEMS, run

MATMUL = ADV_PROBLEMS / "matmul.py"

HONEST_DYNAMO_IMPORT = """
import torch
import torch._dynamo  # torch wraps torch.manual_seed here, itself
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, a, b):
        torch.manual_seed(0)  # the wrapper's first call installs dynamo's disabled copy as well
        return torch.relu(a @ b)
"""

LOOK_ALIKE_WRAPPER = """
import types

import torch
import torch._dynamo
import torch.nn as nn

_real = torch.manual_seed
# torch's own wrapper code, with a closure that holds something else than the original
torch.manual_seed = types.FunctionType(_real.__code__, _real.__globals__, "inner", None,
                                       (types.CellType(lambda *a, **k: None), types.CellType(True)))


class ModelNew(nn.Module):
    def forward(self, a, b):
        return torch.relu(a @ b)
"""


def codes(res) -> set[str]:
    return {f["code"] for f in res.flags}


def test_an_honest_kernel_that_imports_dynamo_is_not_flagged():
    res = run(MATMUL, HONEST_DYNAMO_IMPORT, timing_trials=2)
    assert res.status == "correct", res.error
    assert "reference_patched" not in codes(res) and "patched_timer" not in codes(res), res.flags


def test_a_look_alike_of_torchs_wrapper_is_still_a_patch():
    res = run(MATMUL, LOOK_ALIKE_WRAPPER, timing_trials=0)
    assert "reference_patched" in codes(res), res.flags
    assert "torch.manual_seed" in next(f["message"] for f in res.flags if f["code"] == "reference_patched")
