# CUDA kernel (load_inline) for problems/catalogue/level1/8_RMSNorm.py: one warp per row, float4.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>
#include <c10/cuda/CUDAException.h>

// One warp per row; requires cols % 128 == 0 (1024 here).
__global__ void rmsnorm_warp(const float* __restrict__ x, const float* __restrict__ w, float* __restrict__ y,
                             long rows, int cols, float eps) {
    long row = (blockIdx.x * (long)blockDim.x + threadIdx.x) / 32;
    int lane = threadIdx.x & 31;
    if (row >= rows) return;
    const float4* xr = (const float4*)(x + row * cols);
    float4* yr = (float4*)(y + row * cols);
    const float4* w4 = (const float4*)w;
    int n4 = cols / 4;
    float acc = 0.f;
    float4 buf[8];
    #pragma unroll
    for (int k = 0; k < 8; ++k) {
        int j = lane + k * 32;
        if (j < n4) { buf[k] = xr[j]; acc += buf[k].x*buf[k].x + buf[k].y*buf[k].y + buf[k].z*buf[k].z + buf[k].w*buf[k].w; }
    }
    for (int off = 16; off > 0; off >>= 1) acc += __shfl_xor_sync(0xffffffff, acc, off);
    float r = rsqrtf(acc / cols + eps);
    #pragma unroll
    for (int k = 0; k < 8; ++k) {
        int j = lane + k * 32;
        if (j < n4) {
            float4 wv = w4[j], v = buf[k], o;
            o.x = v.x * r * wv.x; o.y = v.y * r * wv.y; o.z = v.z * r * wv.z; o.w = v.w * r * wv.w;
            yr[j] = o;
        }
    }
}

torch::Tensor rmsnorm(torch::Tensor x, torch::Tensor w, double eps) {
    auto xc = x.contiguous();
    int cols = xc.size(-1);
    TORCH_CHECK(cols % 4 == 0 && cols <= 1024, "cols must be a multiple of 4 and <= 1024");
    long rows = xc.numel() / cols;
    auto y = torch::empty_like(xc);
    int threads = 256;
    long blocks = (rows * 32 + threads - 1) / threads;
    rmsnorm_warp<<<blocks, threads>>>(xc.data_ptr<float>(), w.data_ptr<float>(), y.data_ptr<float>(), rows, cols,
                                      (float)eps);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""
CPP_SRC = "torch::Tensor rmsnorm(torch::Tensor x, torch::Tensor w, double eps);"

_ext = load_inline(
    name="kb_rmsnorm_cuda",
    cpp_sources=CPP_SRC,
    cuda_sources=CUDA_SRC,
    functions=["rmsnorm"],
    extra_cuda_cflags=["-O3", "-gencode=arch=compute_90,code=sm_90"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, features: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(1.0 + 0.5 * torch.linspace(-1.0, 1.0, features))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.rmsnorm(x, self.weight, self.eps)
