import os

import torch
import torch.nn as nn

# Sizes scale with KB_SCALE. Scale 1: batch 4, 8 -> 32 channels (8 groups), 32 x 32 images.
# On an H200 use KB_SCALE=16: batch 64, 128 -> 512 channels (8 groups), 32 x 32.
KB_SCALE = int(os.environ.get("KB_SCALE", "1"))

batch_size = 4 * KB_SCALE
in_channels = 8 * KB_SCALE
out_channels = 32 * KB_SCALE
num_groups = 8
kernel_size = 3
height = 32
width = 32


class Model(nn.Module):
    """Conv2d (3x3, padding 1, with bias) -> GroupNorm (8 groups, affine) -> SiLU."""

    def __init__(self, in_channels: int, out_channels: int, num_groups: int, kernel_size: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2)
        self.norm = nn.GroupNorm(num_groups, out_channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.silu(self.norm(self.conv(x)))


def get_inputs():
    x = torch.randn(batch_size, in_channels, height, width)
    return [x]


def get_init_inputs():
    return [in_channels, out_channels, num_groups, kernel_size]
