"""KernelBench's kernel backends (`backend` of its `eval_kernel_against_ref`: cuda, triton, tilelang,
cute, thunderkittens, hip), recognised from a kernel's source, and what each needs on the host.

A kernel whose backend needs a library this host lacks fails fast, before any process starts,
with an error naming the library (``missing_library``); where the host has it, the kernel runs as
any other. Only the standard library: the check runs in the worker's parent process, which never
imports torch or touches the GPU.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil

BACKENDS: tuple[str, ...] = ("cuda", "triton", "tilelang", "cute", "thunderkittens", "hip")

# Checked in this order: a ThunderKittens or HIP kernel also uses load_inline, a CuTe kernel may
# import triton's helpers, and so on; the most specific marker wins.
_MARKERS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("thunderkittens", re.compile(r"kittens\.cuh|THUNDERKITTENS_ROOT|\bkittens::")),
    ("hip", re.compile(r"hip/hip_runtime\.h|\bhipcc\b|hipLaunchKernelGGL")),
    ("cute", re.compile(r"^\s*(?:import|from)\s+cutlass\b", re.MULTILINE)),
    ("tilelang", re.compile(r"^\s*(?:import|from)\s+tilelang\b", re.MULTILINE)),
    ("triton", re.compile(r"^\s*(?:import|from)\s+triton\b|@triton\.jit", re.MULTILINE)),
    # C++-only load_inline (cpp_sources alone) is no CUDA kernel: it builds and runs on the CPU.
    ("cuda", re.compile(r"__global__|cuda_sources|cuda_runtime\.h")),
)

# backend -> (Python module it imports, what to install)
_MODULES = {
    "triton": ("triton", "the Python package 'triton'"),
    "tilelang": ("tilelang", "the Python package 'tilelang'"),
    "cute": ("cutlass", "the Python package 'nvidia-cutlass-dsl' (module 'cutlass')"),
}


def kernel_backend(source: str) -> str | None:
    """KernelBench's name of the backend `source` is written for, or None (PyTorch only, or C++)."""
    return next((name for name, marker in _MARKERS if marker.search(source)), None)


def _nvcc() -> str | None:
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH") or "/usr/local/cuda"
    candidate = os.path.join(home, "bin", "nvcc")
    return shutil.which("nvcc") or (candidate if os.access(candidate, os.X_OK) else None)


def _hipcc() -> str | None:
    candidate = os.path.join(os.environ.get("ROCM_PATH", "/opt/rocm"), "bin", "hipcc")
    return shutil.which("hipcc") or (candidate if os.access(candidate, os.X_OK) else None)


def _thunderkittens() -> bool:
    root = os.environ.get("THUNDERKITTENS_ROOT", "/root/ThunderKittens")
    return os.path.isfile(os.path.join(root, "include", "kittens.cuh"))


def missing_library(backend: str | None, device: str) -> str | None:
    """Why a kernel of `backend` cannot run on this host with `device`, naming what is missing; None
    when nothing is (or the backend needs nothing beyond PyTorch)."""
    if backend in _MODULES:
        module, what = _MODULES[backend]
        if importlib.util.find_spec(module) is None:
            return f"the {backend} backend needs {what}, which this host lacks"
    if backend in ("cuda", "thunderkittens", "cute", "tilelang", "hip") and device != "cuda":
        return f"the {backend} backend needs a GPU; this evaluation runs on {device}"
    if backend in ("cuda", "thunderkittens") and _nvcc() is None:
        return f"the {backend} backend needs the CUDA compiler nvcc (CUDA toolkit), which this host lacks"
    if backend == "thunderkittens" and not _thunderkittens():
        return "the thunderkittens backend needs ThunderKittens' headers (kittens.cuh under $THUNDERKITTENS_ROOT), which this host lacks"
    if backend == "hip" and _hipcc() is None:
        return "the hip backend needs ROCm's compiler hipcc, which this host lacks"
    return None
