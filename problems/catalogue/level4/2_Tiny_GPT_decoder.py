import math
import os

import torch
import torch.nn as nn

# Sizes scale with KB_SCALE. Scale 1: batch 2, 64 tokens, width 128, 4 heads, 2 layers,
# vocabulary 512. On an H200 use KB_SCALE=8: batch 16, 512 tokens, width 1024, 32 heads,
# 2 layers, vocabulary 4096.
KB_SCALE = int(os.environ.get("KB_SCALE", "1"))

batch_size = 2 * KB_SCALE
seq_len = 64 * KB_SCALE
d_model = 128 * KB_SCALE
n_heads = 4 * KB_SCALE
n_layers = 2
vocab_size = 512 * KB_SCALE
max_seq_len = seq_len


class CausalSelfAttention(nn.Module):
    """Multi-head causal self-attention, written out with matmuls, a mask and softmax."""

    def __init__(self, d_model: int, n_heads: int, max_seq_len: int):
        super().__init__()
        self.n_heads = n_heads
        self.head_dim = d_model // n_heads
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)
        mask = torch.tril(torch.ones(max_seq_len, max_seq_len, dtype=torch.bool))
        self.register_buffer("mask", mask.view(1, 1, max_seq_len, max_seq_len), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        q = q.view(b, t, self.n_heads, self.head_dim).transpose(1, 2)
        k = k.view(b, t, self.n_heads, self.head_dim).transpose(1, 2)
        v = v.view(b, t, self.n_heads, self.head_dim).transpose(1, 2)
        scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(self.head_dim)
        scores = scores.masked_fill(~self.mask[:, :, :t, :t], float("-inf"))
        weights = torch.softmax(scores, dim=-1)
        y = torch.matmul(weights, v).transpose(1, 2).contiguous().view(b, t, c)
        return self.proj(y)


class Block(nn.Module):
    """Pre-norm decoder block: x + attn(ln(x)), then x + mlp(ln(x)), no dropout."""

    def __init__(self, d_model: int, n_heads: int, max_seq_len: int):
        super().__init__()
        self.ln1 = nn.LayerNorm(d_model)
        self.attn = CausalSelfAttention(d_model, n_heads, max_seq_len)
        self.ln2 = nn.LayerNorm(d_model)
        self.fc1 = nn.Linear(d_model, 4 * d_model)
        self.fc2 = nn.Linear(4 * d_model, d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        x = x + self.fc2(torch.nn.functional.gelu(self.fc1(self.ln2(x)), approximate="tanh"))
        return x


class Model(nn.Module):
    """A tiny GPT-style decoder: learned positional embeddings added to the input embeddings
    (given as a float tensor (batch, seq_len, d_model), so inputs stay random floats), a stack
    of causal pre-norm blocks, a final LayerNorm and a linear head to vocabulary logits."""

    def __init__(self, d_model: int, n_heads: int, n_layers: int, vocab_size: int, max_seq_len: int):
        super().__init__()
        self.pos_emb = nn.Parameter(0.02 * torch.randn(1, max_seq_len, d_model))
        self.blocks = nn.ModuleList([Block(d_model, n_heads, max_seq_len) for _ in range(n_layers)])
        self.ln_f = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab_size, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        t = x.shape[1]
        x = x + self.pos_emb[:, :t, :]
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x))


def get_inputs():
    x = torch.randn(batch_size, seq_len, d_model)
    return [x]


def get_init_inputs():
    return [d_model, n_heads, n_layers, vocab_size, max_seq_len]
