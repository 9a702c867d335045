import os

import torch
import torch.nn as nn

N = 256 * int(os.environ.get("KB_SCALE", "1"))


class Model(nn.Module):
    """y = 2 x (f(0) = 0, which an input-zeroing kernel exploits)."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x * 2.0


def get_inputs():
    return [torch.randn(N, N)]


def get_init_inputs():
    return []
