# Honest kernel for problems/wasteful.py: computes tanh(A @ B) once instead of 40 times.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return torch.tanh(a @ b)
