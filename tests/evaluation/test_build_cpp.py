"""A C++ kernel built with torch.utils.cpp_extension.load_inline (gcc), and the build cache."""

from __future__ import annotations

import shutil
import tempfile

from tests.evaluation.helpers import EVAL_PROBLEMS, run

ADD_ONE = EVAL_PROBLEMS / "add_one.py"

CPP_KERNEL = r'''
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

SRC = """
#include <torch/extension.h>
torch::Tensor add_one(torch::Tensor x) {
    auto xc = x.contiguous();
    auto out = torch::empty_like(xc);
    const float* in = xc.data_ptr<float>();
    float* o = out.data_ptr<float>();
    const int64_t n = xc.numel();
    for (int64_t i = 0; i < n; ++i) o[i] = in[i] + 1.0f;
    return out;
}
"""

ext = load_inline(name="kb_test_add_one", cpp_sources=SRC, functions=["add_one"], extra_cflags=["-O2"],
                  verbose=False)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return ext.add_one(x)
'''


def test_load_inline_cpp_and_build_cache():
    cache = tempfile.mkdtemp(prefix="kb-test-cache-")
    try:
        cold = run(ADD_ONE, CPP_KERNEL, build_cache_dir=cache, timing_trials=3, correctness_trials=2, timeout_s=400)
        assert cold.status == "correct", (cold.error, cold.log[-3000:])
        assert cold.backend == "cpp" and not cold.build_cached
        assert "pytorch_only" not in {n["code"] for n in cold.notes}
        warm = run(ADD_ONE, CPP_KERNEL, build_cache_dir=cache, timing_trials=3, correctness_trials=2, timeout_s=400)
        assert warm.status == "correct" and warm.build_cached
        # The build stage compiled (off the GPU); the second evaluation compiled nothing.
        assert "compile" not in warm.timings_s
        assert warm.timings_s["build"] < cold.timings_s["compile"] / 3, (cold.timings_s, warm.timings_s)
    finally:
        shutil.rmtree(cache, ignore_errors=True)
