"""KernelBench's backends recognised from a kernel's source; a backend whose library the host lacks
fails fast with an error naming it (evaluation/phases/backends.py)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from evaluation.phases.backends import BACKENDS, kernel_backend, missing_library

KERNELBENCH_EXAMPLES = {
    "cuda": 'from torch.utils.cpp_extension import load_inline\nsrc = """__global__ void add() {}"""\n',
    "triton": "import triton\nimport triton.language as tl\n\n@triton.jit\ndef add(x): pass\n",
    "tilelang": "import torch\nimport tilelang\nimport tilelang.language as T\n",
    "cute": "import torch\nimport cutlass\nimport cutlass.cute as cute\n",
    "thunderkittens": 'from torch.utils.cpp_extension import load_inline\nsrc = """#include "kittens.cuh"\n"""\n',
    "hip": 'import os\nos.environ["CXX"] = "hipcc"\nsrc = """#include <hip/hip_runtime.h>"""\nload_inline(name="x")\n',
}


@pytest.mark.parametrize("backend", BACKENDS)
def test_each_backend_is_recognised(backend):
    assert kernel_backend(KERNELBENCH_EXAMPLES[backend]) == backend


def test_pytorch_only_kernels_have_no_backend():
    assert kernel_backend("import torch\nclass ModelNew(torch.nn.Module):\n    pass\n") is None
    cpp_only = 'from torch.utils.cpp_extension import load_inline\nm = load_inline(name="m", cpp_sources="int f();")\n'
    assert kernel_backend(cpp_only) is None
    assert missing_library(None, "cpu") is None


def test_a_missing_python_library_is_named(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name in ("tilelang", "cutlass") else real(name, *a)
    )
    assert (
        missing_library("tilelang", "cuda")
        == "the tilelang backend needs the Python package 'tilelang', which this host lacks"
    )
    assert "'nvidia-cutlass-dsl' (module 'cutlass')" in missing_library("cute", "cuda")


def test_gpu_backends_need_a_gpu_and_their_compilers(monkeypatch, tmp_path: Path):
    assert missing_library("cuda", "cpu") == "the cuda backend needs a GPU; this evaluation runs on cpu"
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("CUDA_HOME", str(tmp_path))
    monkeypatch.setenv("ROCM_PATH", str(tmp_path))
    assert "nvcc" in missing_library("cuda", "cuda")
    assert "hipcc" in missing_library("hip", "cuda")
    nvcc = tmp_path / "bin" / "nvcc"
    nvcc.parent.mkdir()
    nvcc.write_text("#!/bin/sh\n")
    nvcc.chmod(0o755)
    monkeypatch.setenv("THUNDERKITTENS_ROOT", str(tmp_path / "tk"))
    assert missing_library("cuda", "cuda") is None
    assert "kittens.cuh" in missing_library("thunderkittens", "cuda")
    (tmp_path / "tk" / "include").mkdir(parents=True)
    (tmp_path / "tk" / "include" / "kittens.cuh").write_text("")
    assert missing_library("thunderkittens", "cuda") is None


def test_the_runner_ends_a_kernel_whose_backend_the_host_lacks_at_once():
    from evaluation import EvaluationConfig, evaluate  # deferred: starts sandboxed processes
    from tests.evaluation.helpers import EVAL_PROBLEMS, read

    kernel = "import torch\nimport tilelang\n\nclass ModelNew(torch.nn.Module):\n    pass\n"
    result = evaluate(read(EVAL_PROBLEMS / "matmul_small.py"), kernel, EvaluationConfig(timeout_s=60))
    assert result.status == "compile_error" and result.compiled is False
    assert result.error == "the tilelang backend needs the Python package 'tilelang', which this host lacks"
