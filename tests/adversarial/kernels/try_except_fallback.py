# Not an exploit by itself: a "custom" path that always fails and silently falls back to PyTorch.
import torch
import torch.nn as nn


def _custom(a, b):
    raise RuntimeError("pretend the custom extension failed to build")


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        try:
            return _custom(a, b)
        except Exception:
            return torch.relu(a @ b)
