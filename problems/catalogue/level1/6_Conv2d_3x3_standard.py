import os

import torch
import torch.nn as nn

# Sizes scale with KB_SCALE. Scale 1: batch 4, 16 -> 32 channels, 32 x 32 images.
# On an H200 use KB_SCALE=16: batch 64, 256 -> 512 channels, 32 x 32 (about 155 GFLOP).
KB_SCALE = int(os.environ.get("KB_SCALE", "1"))

batch_size = 4 * KB_SCALE
in_channels = 16 * KB_SCALE
out_channels = 32 * KB_SCALE
kernel_size = 3
height = 32
width = 32


class Model(nn.Module):
    """A standard 2D convolution, 3x3 kernel, stride 1, padding 1, with bias."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


def get_inputs():
    x = torch.randn(batch_size, in_channels, height, width)
    return [x]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
