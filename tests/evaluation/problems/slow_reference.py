import time

import torch
import torch.nn as nn

N = 64


class Model(nn.Module):
    """y = x + 1, after a 200 ms pause: a reference far slower than the work it does (the speed-of-light
    tests give the CPU peaks at which 50 ms is the least time, so the reference is within the bound and
    an honest kernel beats it)."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        time.sleep(0.2)
        return x + 1.0


def get_inputs():
    return [torch.randn(N, N)]


def get_init_inputs():
    return []
