"""Sources shared by the test suites."""

import textwrap

# A minimal KernelBench problem: Model, size constants, get_inputs, get_init_inputs.
PROBLEM_SOURCE = textwrap.dedent(
    """
    import torch
    import torch.nn as nn

    class Model(nn.Module):
        def __init__(self):
            super().__init__()

        def forward(self, a, b):
            return torch.matmul(a, b)

    N = 64

    def get_inputs():
        return [torch.randn(N, N), torch.randn(N, N)]

    def get_init_inputs():
        return []
    """
)
