import os

import torch
import torch.nn as nn

N = 128 * int(os.environ.get("KB_SCALE", "1"))


class Model(nn.Module):
    """tanh(A @ B) computed 40 times over (a reference that wastes work: honest kernels beat it >10x)."""

    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        y = None
        for _ in range(40):
            y = torch.tanh(a @ b)
        return y


def get_inputs():
    return [torch.randn(N, N), torch.randn(N, N)]


def get_init_inputs():
    return []
