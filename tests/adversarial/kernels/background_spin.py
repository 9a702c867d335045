# Exploit: honest work, plus a thread started when the module is imported (so no thread is "left
# running" by a call) that keeps a CPU busy. When the processes share their cores (as the sweep pins
# them, so that each is timed on the same vCPU), the spinning thread slows the reference down and
# the kernel's speedup goes up.
import threading

import torch
import torch.nn as nn


def _spin():
    x = 0
    while True:
        x += 1


threading.Thread(target=_spin, daemon=True).start()


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return torch.relu(a @ b)
