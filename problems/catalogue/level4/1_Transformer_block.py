import math
import os

import torch
import torch.nn as nn

# Sizes scale with KB_SCALE. Scale 1: batch 2, 64 tokens, width 128, 4 heads, MLP 512.
# On an H200 use KB_SCALE=8: batch 16, 512 tokens, width 1024, 32 heads (head size 32), MLP 4096.
KB_SCALE = int(os.environ.get("KB_SCALE", "1"))

batch_size = 2 * KB_SCALE
seq_len = 64 * KB_SCALE
d_model = 128 * KB_SCALE
n_heads = 4 * KB_SCALE
mlp_ratio = 4


class Model(nn.Module):
    """A pre-norm transformer encoder block without dropout:

        x = x + Attention(LayerNorm(x))      (multi-head, non-causal, softmax(QK^T / sqrt(d)) V)
        x = x + MLP(LayerNorm(x))            (Linear -> GELU -> Linear, hidden = 4 * d_model)

    Attention is written out with matmuls and softmax so that every operation is visible.
    """

    def __init__(self, d_model: int, n_heads: int, mlp_ratio: int):
        super().__init__()
        assert d_model % n_heads == 0
        self.n_heads = n_heads
        self.head_dim = d_model // n_heads
        self.ln1 = nn.LayerNorm(d_model)
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)
        self.ln2 = nn.LayerNorm(d_model)
        self.fc1 = nn.Linear(d_model, mlp_ratio * d_model)
        self.fc2 = nn.Linear(mlp_ratio * d_model, d_model)

    def attention(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        q = q.view(b, t, self.n_heads, self.head_dim).transpose(1, 2)
        k = k.view(b, t, self.n_heads, self.head_dim).transpose(1, 2)
        v = v.view(b, t, self.n_heads, self.head_dim).transpose(1, 2)
        scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(self.head_dim)
        weights = torch.softmax(scores, dim=-1)
        y = torch.matmul(weights, v).transpose(1, 2).contiguous().view(b, t, c)
        return self.proj(y)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attention(self.ln1(x))
        x = x + self.fc2(torch.nn.functional.gelu(self.fc1(self.ln2(x))))
        return x


def get_inputs():
    x = torch.randn(batch_size, seq_len, d_model)
    return [x]


def get_init_inputs():
    return [d_model, n_heads, mlp_ratio]
