import os

import torch
import torch.nn as nn

N = 256 * int(os.environ.get("KB_SCALE", "1"))


class Model(nn.Module):
    """y = tanh(x) * 1e-6: outputs far below atol, so all-zeros passes elementwise tolerances."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.tanh(x) * 1e-6


def get_inputs():
    return [torch.randn(N, N)]


def get_init_inputs():
    return []
