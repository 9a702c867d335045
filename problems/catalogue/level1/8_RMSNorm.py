import os

import torch
import torch.nn as nn

# Sizes scale with KB_SCALE. Scale 1: 16 x 128 rows of 1024 features.
# On an H200 use KB_SCALE=16: 256 x 2048 rows of 1024 features (2 GiB).
KB_SCALE = int(os.environ.get("KB_SCALE", "1"))

batch_size = 16 * KB_SCALE
seq_len = 128 * KB_SCALE
features = 1024
eps = 1e-6


class Model(nn.Module):
    """RMS normalisation over the last dimension: x / sqrt(mean(x^2) + eps) * weight.

    Written out in plain tensor operations (as LLaMA-style models do) rather than nn.RMSNorm.
    The weight starts at 1 + a small deterministic ramp so that it is not a no-op.
    """

    def __init__(self, features: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(1.0 + 0.5 * torch.linspace(-1.0, 1.0, features))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rms = torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps)
        return x * rms * self.weight


def get_inputs():
    x = torch.randn(batch_size, seq_len, features)
    return [x]


def get_init_inputs():
    return [features, eps]
