import os

import torch
import torch.nn as nn

SCALE = int(os.environ.get("KB_SCALE", "1"))
N = 128 * SCALE


class Model(nn.Module):
    """C = relu(A @ B) + bias."""

    def __init__(self, n: int):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(n))

    def forward(self, a, b):
        return torch.relu(a @ b) + self.bias


def get_inputs():
    return [torch.randn(N, N), torch.randn(N, N)]


def get_init_inputs():
    return [N]
