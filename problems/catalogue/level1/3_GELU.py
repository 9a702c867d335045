import os

import torch
import torch.nn as nn

# Sizes scale with KB_SCALE. Scale 1: 16 x 16384 elements (1 MiB).
# On an H200 use KB_SCALE=32: 512 x 524288 elements (1 GiB), memory-bound: about 0.5 ms.
KB_SCALE = int(os.environ.get("KB_SCALE", "1"))

batch_size = 16 * KB_SCALE
dim = 16384 * KB_SCALE


class Model(nn.Module):
    """Element-wise GELU activation (the exact, erf-based form)."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.gelu(x)


def get_inputs():
    x = torch.randn(batch_size, dim)
    return [x]


def get_init_inputs():
    return []
