import os

import torch
import torch.nn as nn

# Sizes scale with KB_SCALE. Scale 1: 16 rows of 4096.
# On an H200 use KB_SCALE=64: 1024 rows of 262144 (1 GiB): about 1 ms.
# LogSoftmax rather than Softmax: softmax over thousands of columns has outputs around 1e-4,
# so tiny that an all-zero output could pass an absolute tolerance; log-probabilities are O(10).
KB_SCALE = int(os.environ.get("KB_SCALE", "1"))

batch_size = 16 * KB_SCALE
dim = 4096 * KB_SCALE


class Model(nn.Module):
    """Log-softmax over the last dimension of a (batch, dim) tensor."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.log_softmax(x, dim=1)


def get_inputs():
    x = torch.randn(batch_size, dim)
    return [x]


def get_init_inputs():
    return []
