import os

import torch
import torch.nn as nn

# Sizes scale with KB_SCALE. Scale 1: batch 16 of 3 x 32 x 32 images, widths 16/32/64, 10 classes.
# On an H200 use KB_SCALE=16: batch 256 with widths 256/512/1024.
KB_SCALE = int(os.environ.get("KB_SCALE", "1"))

batch_size = 16 * KB_SCALE
in_channels = 3
image_size = 32
width = 16 * KB_SCALE
num_classes = 10


class Model(nn.Module):
    """A small CNN classifier: three (Conv3x3 -> BatchNorm -> ReLU -> MaxPool2) stages that take
    32 x 32 images down to 4 x 4, then flatten and a linear classifier producing logits.

    Evaluated as constructed (training mode), so BatchNorm uses the batch's statistics.
    """

    def __init__(self, in_channels: int, width: int, num_classes: int, image_size: int):
        super().__init__()
        layers = []
        channels = in_channels
        for out_channels in (width, 2 * width, 4 * width):
            layers += [
                nn.Conv2d(channels, out_channels, 3, padding=1, bias=False),
                nn.BatchNorm2d(out_channels),
                nn.ReLU(),
                nn.MaxPool2d(2),
            ]
            channels = out_channels
        self.features = nn.Sequential(*layers)
        final_size = image_size // 8
        self.classifier = nn.Linear(channels * final_size * final_size, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.features(x)
        return self.classifier(torch.flatten(x, 1))


def get_inputs():
    x = torch.randn(batch_size, in_channels, image_size, image_size)
    return [x]


def get_init_inputs():
    return [in_channels, width, num_classes, image_size]
