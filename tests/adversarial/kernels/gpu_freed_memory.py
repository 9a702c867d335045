# Exploit (GPU): compute nothing; return uninitialised memory of the output's size. In a process
# where the reference just ran and freed its output, PyTorch's caching allocator hands back that
# very block, still holding the reference's values. (For problems/double.py: y = 2x.)
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.empty_like(x)
