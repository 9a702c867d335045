import os

import torch
import torch.nn as nn

# Sizes scale with KB_SCALE. Scale 1: batch 8, 32 channels, 64 x 64.
# On an H200 use KB_SCALE=16: batch 128, 512 channels, 64 x 64 (1 GiB in).
KB_SCALE = int(os.environ.get("KB_SCALE", "1"))

batch_size = 8 * KB_SCALE
channels = 32 * KB_SCALE
height = 64
width = 64
kernel_size = 3
stride = 2
padding = 1


class Model(nn.Module):
    """2D max pooling, 3x3 window, stride 2, padding 1."""

    def __init__(self, kernel_size: int, stride: int, padding: int):
        super().__init__()
        self.pool = nn.MaxPool2d(kernel_size=kernel_size, stride=stride, padding=padding)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pool(x)


def get_inputs():
    x = torch.randn(batch_size, channels, height, width)
    return [x]


def get_init_inputs():
    return [kernel_size, stride, padding]
