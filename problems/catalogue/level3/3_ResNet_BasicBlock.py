import os

import torch
import torch.nn as nn

# Sizes scale with KB_SCALE. Scale 1: batch 4, 32 -> 64 channels, 32 x 32 -> 16 x 16 (stride 2).
# On an H200 use KB_SCALE=16: batch 64, 512 -> 1024 channels.
KB_SCALE = int(os.environ.get("KB_SCALE", "1"))

batch_size = 4 * KB_SCALE
in_channels = 32 * KB_SCALE
out_channels = 64 * KB_SCALE
stride = 2
height = 32
width = 32


class Model(nn.Module):
    """A ResNet basic block with a projection shortcut:
    relu(bn2(conv2(relu(bn1(conv1(x))))) + bn_d(conv_1x1(x))).

    Evaluated as constructed (training mode), so BatchNorm uses the batch's statistics.
    """

    def __init__(self, in_channels: int, out_channels: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, out_channels, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(out_channels)
        self.conv2 = nn.Conv2d(out_channels, out_channels, 3, stride=1, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(out_channels)
        self.downsample = nn.Sequential(
            nn.Conv2d(in_channels, out_channels, 1, stride=stride, bias=False),
            nn.BatchNorm2d(out_channels),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = self.downsample(x)
        out = torch.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return torch.relu(out + identity)


def get_inputs():
    x = torch.randn(batch_size, in_channels, height, width)
    return [x]


def get_init_inputs():
    return [in_channels, out_channels, stride]
