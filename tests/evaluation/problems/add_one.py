import os

import torch
import torch.nn as nn

N = 64 * int(os.environ.get("KB_SCALE", "1"))


class Model(nn.Module):
    """y = x + 1 (tiny: for tests of failure modes, where timing does not matter)."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x + 1.0


def get_inputs():
    return [torch.randn(N, N)]


def get_init_inputs():
    return []
