import os

import torch
import torch.nn as nn

N = 192 * int(os.environ.get("KB_SCALE", "1"))


class Model(nn.Module):
    """relu(A @ B): enough arithmetic (~14 MFLOP at scale 1) to time on a CPU."""

    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return torch.relu(a @ b)


def get_inputs():
    return [torch.randn(N, N), torch.randn(N, N)]


def get_init_inputs():
    return []
