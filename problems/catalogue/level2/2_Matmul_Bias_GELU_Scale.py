import os

import torch
import torch.nn as nn

# Sizes scale with KB_SCALE. Scale 1: (128 x 512) @ (512 x 1024) plus bias.
# On an H200 use KB_SCALE=16: (2048 x 8192) @ (8192 x 16384), about 550 GFLOP.
KB_SCALE = int(os.environ.get("KB_SCALE", "1"))

batch_size = 128 * KB_SCALE
in_features = 512 * KB_SCALE
out_features = 1024 * KB_SCALE
scale = 2.0


class Model(nn.Module):
    """A linear layer (matmul + bias), then GELU (tanh approximation), then a constant scale."""

    def __init__(self, in_features: int, out_features: int, scale: float):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.linear(x)
        y = torch.nn.functional.gelu(y, approximate="tanh")
        return y * self.scale


def get_inputs():
    x = torch.randn(batch_size, in_features)
    return [x]


def get_init_inputs():
    return [in_features, out_features, scale]
