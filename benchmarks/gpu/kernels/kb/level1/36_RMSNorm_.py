# A fused Triton kernel for KernelBench level1/36_RMSNorm_ (x: 112 x 64 x 512 x 512 fp32, RMS over
# dim 1): one program per (batch, 1024 spatial positions) reads x twice (sum of squares, then
# scale) and writes y once; PyTorch's reference makes x**2, the mean, the sqrt and the division
# as separate passes over 7.5 GB.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _rms_dim1(x_ptr, y_ptr, F, S, eps, BLOCK: tl.constexpr):
    b = tl.program_id(1).to(tl.int64)
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < S
    base = b * F * S
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for f in range(0, F):
        x = tl.load(x_ptr + base + f * S + offs, mask=mask, other=0.0)
        acc += x * x
    rms = tl.sqrt(acc / F + eps)
    for f in range(0, F):
        x = tl.load(x_ptr + base + f * S + offs, mask=mask, other=0.0)
        tl.store(y_ptr + base + f * S + offs, x / rms, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, num_features: int, eps: float = 1e-5):
        super().__init__()
        self.num_features = num_features
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        b, f = x.shape[0], x.shape[1]
        s = x.numel() // (b * f)
        y = torch.empty_like(x)
        block = 1024
        _rms_dim1[(triton.cdiv(s, block), b)](x, y, f, s, self.eps, BLOCK=block, num_warps=4)
        return y
