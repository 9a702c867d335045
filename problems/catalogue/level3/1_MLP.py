import os

import torch
import torch.nn as nn

# Sizes scale with KB_SCALE. Scale 1: batch 64, 512 -> 1024 -> 1024 -> 256.
# On an H200 use KB_SCALE=16: batch 1024, 8192 -> 16384 -> 16384 -> 4096 (about 1 TFLOP).
KB_SCALE = int(os.environ.get("KB_SCALE", "1"))

batch_size = 64 * KB_SCALE
input_size = 512 * KB_SCALE
layer_sizes = [1024 * KB_SCALE, 1024 * KB_SCALE]
output_size = 256 * KB_SCALE


class Model(nn.Module):
    """A small multi-layer perceptron: Linear -> ReLU for each hidden layer, then a Linear head.

    Weights use He (Kaiming) normal initialisation, as suits ReLU networks, and zero biases, so
    activations keep roughly unit scale instead of shrinking layer by layer.
    """

    def __init__(self, input_size: int, layer_sizes: list, output_size: int):
        super().__init__()
        layers = []
        current = input_size
        for size in layer_sizes:
            layers.append(nn.Linear(current, size))
            layers.append(nn.ReLU())
            current = size
        layers.append(nn.Linear(current, output_size))
        self.network = nn.Sequential(*layers)
        for layer in self.network:
            if isinstance(layer, nn.Linear):
                nn.init.kaiming_normal_(layer.weight, nonlinearity="relu")
                nn.init.zeros_(layer.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.network(x)


def get_inputs():
    x = torch.randn(batch_size, input_size)
    return [x]


def get_init_inputs():
    return [input_size, layer_sizes, output_size]
