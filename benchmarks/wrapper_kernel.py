"""The one small C++ kernel (a ``load_inline`` wrapper, no CUDA) that the build benchmarks and the
build tests compile: ``wrapper_kernel(name)`` is its source under the module name ``name`` (another
name: another source, another translation unit)."""

from __future__ import annotations

#: Its wrapper includes ``torch/extension.h``, as most kernels do; the module name is ``"NAME"``.
WRAPPER_KERNEL = r'''
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

SRC = """
#include <torch/extension.h>
torch::Tensor scale_shift(torch::Tensor x, double a) {
    auto xc = x.contiguous();
    auto out = torch::empty_like(xc);
    const float* in = xc.data_ptr<float>();
    float* o = out.data_ptr<float>();
    for (int64_t i = 0; i < xc.numel(); ++i) o[i] = in[i] * (float)a + 0.25f;
    return out;
}
"""

ext = load_inline(name="NAME", cpp_sources=SRC, functions=["scale_shift"], verbose=False)


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.scale_shift(x, 1.5)
'''


def wrapper_kernel(name: str) -> str:
    """``WRAPPER_KERNEL`` under the module name ``name``."""
    return WRAPPER_KERNEL.replace('"NAME"', repr(name))
