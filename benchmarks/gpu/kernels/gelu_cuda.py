# CUDA kernel (load_inline) for problems/catalogue/level1/3_GELU.py: exact GELU, float4 loads.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>
#include <c10/cuda/CUDAException.h>

__global__ void gelu_vec4(const float4* __restrict__ x, float4* __restrict__ y, long n4) {
    long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    long stride = (long)gridDim.x * blockDim.x;
    for (; i < n4; i += stride) {
        float4 v = x[i];
        float4 r;
        r.x = 0.5f * v.x * (1.0f + erff(v.x * 0.70710678118654752f));
        r.y = 0.5f * v.y * (1.0f + erff(v.y * 0.70710678118654752f));
        r.z = 0.5f * v.z * (1.0f + erff(v.z * 0.70710678118654752f));
        r.w = 0.5f * v.w * (1.0f + erff(v.w * 0.70710678118654752f));
        y[i] = r;
    }
}

__global__ void gelu_tail(const float* __restrict__ x, float* __restrict__ y, long start, long n) {
    long i = start + blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i < n) y[i] = 0.5f * x[i] * (1.0f + erff(x[i] * 0.70710678118654752f));
}

torch::Tensor gelu(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "float32 CUDA tensor expected");
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    long n = xc.numel();
    long n4 = n / 4;
    int threads = 256;
    int blocks = (int)std::min<long>((n4 + threads - 1) / threads, 132L * 32);
    if (n4 > 0) gelu_vec4<<<blocks, threads>>>((const float4*)xc.data_ptr<float>(), (float4*)y.data_ptr<float>(), n4);
    if (n - n4 * 4 > 0) gelu_tail<<<1, 4>>>(xc.data_ptr<float>(), y.data_ptr<float>(), n4 * 4, n);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""
CPP_SRC = "torch::Tensor gelu(torch::Tensor x);"

_ext = load_inline(
    name="kb_gelu_cuda",
    cpp_sources=CPP_SRC,
    cuda_sources=CUDA_SRC,
    functions=["gelu"],
    extra_cuda_cflags=["-O3", "-gencode=arch=compute_90,code=sm_90"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.gelu(x)
