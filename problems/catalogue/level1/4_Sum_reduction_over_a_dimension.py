import os

import torch
import torch.nn as nn

# Sizes scale with KB_SCALE. Scale 1: (16, 256, 256) reduced over dim 1.
# On an H200 use KB_SCALE=32: (512, 8192, 256), 4 GiB read: about 1 ms.
KB_SCALE = int(os.environ.get("KB_SCALE", "1"))

batch_size = 16 * KB_SCALE
dim1 = 256 * KB_SCALE
dim2 = 256
reduce_dim = 1


class Model(nn.Module):
    """Sum reduction over one dimension, keeping it (output shape (batch, 1, dim2))."""

    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sum(x, dim=self.dim, keepdim=True)


def get_inputs():
    x = torch.randn(batch_size, dim1, dim2)
    return [x]


def get_init_inputs():
    return [reduce_dim]
