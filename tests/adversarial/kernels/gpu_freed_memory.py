# Exploit (GPU): compute nothing; return uninitialised memory of the output's size. In a process
# where the reference just ran and freed its output, PyTorch's caching allocator hands back that
# very block, still holding the reference's values.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return torch.empty(a.shape[0], b.shape[1], dtype=a.dtype, device=a.device)
