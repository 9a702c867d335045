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

# A KernelBench level 4 problem: a Hugging Face model, which needs `transformers` and downloaded
# weights that no sandbox here has.
HF_PROBLEM_SOURCE = """import torch
from transformers import AutoModelForCausalLM, AutoConfig

class Model(torch.nn.Module):
    def __init__(self, model_name, config):
        super().__init__()
        self.model = AutoModelForCausalLM.from_pretrained(model_name, config=config)

    def forward(self, x):
        return self.model(x).logits

model_name = "EleutherAI/gpt-neo-2.7B"
config = AutoConfig.from_pretrained(model_name)

def get_inputs():
    return [torch.randint(0, 50000, (32, 256))]

def get_init_inputs():
    return [model_name, config]
"""
