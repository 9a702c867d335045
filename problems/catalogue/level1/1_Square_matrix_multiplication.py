import os

import torch
import torch.nn as nn

# Sizes scale with KB_SCALE. Scale 1: N = 256 (about 34 MFLOP, a few ms on 2 CPU cores).
# On an H200 use KB_SCALE=16 (N = 4096, about 137 GFLOP).
KB_SCALE = int(os.environ.get("KB_SCALE", "1"))

N = 256 * KB_SCALE


class Model(nn.Module):
    """A single square matrix multiplication, C = A @ B, with A and B of shape (N, N)."""

    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.matmul(A, B)


def get_inputs():
    A = torch.randn(N, N)
    B = torch.randn(N, N)
    return [A, B]


def get_init_inputs():
    return []
