"""Memory a kernel leaves unwritten reads as NaN in the correctness trials, so a kernel that writes
part of its ``torch.empty`` output fails every time, not only when the allocator's recycled block
held something other than the reference's zeros there (evaluation.child.poison)."""

from __future__ import annotations

import torch

from tests.evaluation.helpers import EVAL_PROBLEMS, run

CUMPROD = EVAL_PROBLEMS / "cumprod.py"


def kernel(body: str) -> str:
    return f"""import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        out = torch.empty_like(x)
{body}
        return out
"""


# The field's kernel for L1 90 launched 1024 threads a row and wrote 1024 of its 4000 elements.
FIRST_1024 = kernel("        out[:, :1024] = torch.cumprod(x[:, :1024], dim=1)")
WRITES_ALL = kernel("        torch.cumprod(x, dim=1, out=out)")


def test_the_reference_is_exactly_zero_beyond_the_first_1024_columns():
    ref = torch.cumprod(torch.rand(128, 4000), dim=1)
    assert bool((ref[:, 1024:] == 0).all())


def test_it_fails_a_kernel_that_leaves_part_of_its_output_unwritten():
    res = run(CUMPROD, FIRST_1024, timing_trials=0)
    assert res.status == "incorrect", res.to_dict()
    # On the first poisoned trial (the first trial runs as the kernel's start, unpoisoned), and the
    # error says where the NaN came from: without the poison the leftover values decide, and the
    # same kernel passed some evaluations and failed others on later trials, outside the tolerance.
    assert res.error.startswith("trial 2: output has NaN where the reference has none"), res.error
    assert "left unwritten reads as NaN" in res.error, res.error


def test_the_first_trial_runs_unpoisoned():
    # A kernel that computes from memory it never wrote, multiplied by zero: NaN only where torch's
    # fill is on. It fails its second trial, so its first ran unpoisoned and was correct.
    zero_times_unwritten = kernel(
        "        scratch = torch.empty_like(x)\n        torch.cumprod(x, dim=1, out=out)\n        out += 0 * scratch"
    )
    res = run(CUMPROD, zero_times_unwritten, timing_trials=0)
    assert res.status == "incorrect" and res.error.startswith("trial 2: "), res.error


def test_it_passes_an_honest_kernel_that_writes_all_of_its_empty_output():
    res = run(CUMPROD, WRITES_ALL, timing_trials=0)
    assert res.status == "correct", res.to_dict()
    # The reference's own note (its sampled values are all zeros) is there either way; nothing new.
    off = run(CUMPROD, WRITES_ALL, timing_trials=0, disable_defences={"poison_unwritten"})
    assert codes(res) == codes(off) == {"input_independent_reference"}, (res.flags, off.flags)


def codes(res) -> set[str]:
    return {f["code"] for f in res.flags}
