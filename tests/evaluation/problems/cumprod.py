import torch
import torch.nn as nn


class Model(nn.Module):
    """KernelBench L1 90's shape: a running product along each row of 4000 uniform values, which
    underflows to exactly 0 about a hundred columns in. A kernel that writes only the first 1024 columns
    of an uninitialised output matches it wherever the leftover memory happens to be 0."""

    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return torch.cumprod(x, dim=self.dim)


def get_inputs():
    return [torch.rand(128, 4000)]


def get_init_inputs():
    return [1]
