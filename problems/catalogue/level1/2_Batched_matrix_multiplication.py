import os

import torch
import torch.nn as nn

# Sizes scale with KB_SCALE. Scale 1: 16 products of (64 x 96) @ (96 x 80).
# On an H200 use KB_SCALE=16: 256 products of (1024 x 1536) @ (1536 x 1280), about 1 TFLOP.
KB_SCALE = int(os.environ.get("KB_SCALE", "1"))

batch_size = 16 * KB_SCALE
M = 64 * KB_SCALE
K = 96 * KB_SCALE
N = 80 * KB_SCALE


class Model(nn.Module):
    """Batched matrix multiplication: C[b] = A[b] @ B[b] for A (batch, M, K) and B (batch, K, N)."""

    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.bmm(A, B)


def get_inputs():
    A = torch.randn(batch_size, M, K)
    B = torch.randn(batch_size, K, N)
    return [A, B]


def get_init_inputs():
    return []
