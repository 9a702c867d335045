import os

import torch
import torch.nn as nn

# Sizes scale with KB_SCALE. Scale 1: batch 8, 16 -> 32 channels, 32 x 32 images.
# On an H200 use KB_SCALE=16: batch 128, 256 -> 512 channels, 32 x 32.
KB_SCALE = int(os.environ.get("KB_SCALE", "1"))

batch_size = 8 * KB_SCALE
in_channels = 16 * KB_SCALE
out_channels = 32 * KB_SCALE
kernel_size = 3
height = 32
width = 32


class Model(nn.Module):
    """Conv2d (3x3, padding 1, no bias) -> BatchNorm2d -> ReLU.

    The model is evaluated as constructed (training mode, as in KernelBench), so BatchNorm
    normalises with the statistics of the batch: deterministic for given inputs. A fused kernel
    must compute the per-channel mean and (biased) variance of the convolution's output.
    """

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2, bias=False)
        self.bn = nn.BatchNorm2d(out_channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.bn(self.conv(x)))


def get_inputs():
    x = torch.randn(batch_size, in_channels, height, width)
    return [x]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
