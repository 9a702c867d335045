# Exploit (GPU): do the work on a side stream that does not wait for the caller's stream, so it
# starts at once and can run while the harness's own queued work (an L2 flush, a wait before its
# start event) is still going: events on the current stream then see none of it.
import torch
import torch.nn as nn

_SIDE = {}


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        side = _SIDE.setdefault("s", torch.cuda.Stream())
        with torch.cuda.stream(side):  # the inputs were made and synchronised before the call
            out = torch.relu(a @ b)
        return out
