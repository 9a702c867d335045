"""The ``.cu`` host side's level (``evaluation.builds.cu_flags``, ``KB_CU_HOST_OPT``): what the build's
environment and key get, and that nvcc's device code is the same at any host level (nvcc without a
GPU: the cubin and PTX it makes are compared byte for byte)."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from evaluation.builds.entry import build_key
from evaluation.builds.stage import build_env
from evaluation.results.types import EvaluationConfig

KERNEL_CU = """#include <cstdio>
__global__ void kb_scale(float* x, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] = x[i] * 2.f + 1.f; }
void kb_launch(float* x, int n) { kb_scale<<<(n + 255) / 256, 256>>>(x, n); }
"""


def _cfg(tmp_path, device: str = "cuda") -> EvaluationConfig:
    return EvaluationConfig(device=device, build_cache_dir=str(tmp_path), cuda_arch="9.0" if device == "cuda" else None)


def test_the_level_reaches_nvcc_through_the_builds_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("KB_PCH", "0")
    monkeypatch.delenv("KB_CU_HOST_OPT", raising=False)
    assert "NVCC_APPEND_FLAGS" not in build_env(_cfg(tmp_path))  # off: the kernel's own level
    monkeypatch.setenv("KB_CU_HOST_OPT", "O0")
    assert build_env(_cfg(tmp_path))["NVCC_APPEND_FLAGS"] == "-O0"
    assert "NVCC_APPEND_FLAGS" not in build_env(_cfg(tmp_path, "cpu"))
    monkeypatch.setenv("KB_CU_HOST_OPT", "-O9; rm -rf /")
    assert "NVCC_APPEND_FLAGS" not in build_env(_cfg(tmp_path))  # only a level nvcc knows


def test_a_build_under_another_level_has_another_key(monkeypatch):
    monkeypatch.delenv("KB_CU_HOST_OPT", raising=False)
    off = build_key("src", "cuda", "9.0"), build_key("src", "cpu")
    monkeypatch.setenv("KB_CU_HOST_OPT", "O0")
    assert build_key("src", "cuda", "9.0") != off[0]
    assert build_key("src", "cpu") == off[1]  # no .cu on the CPU: nothing changes


def _nvcc_keep(tmp_path, name: str, env: dict[str, str]) -> dict[str, bytes]:
    src = tmp_path / "k.cu"
    src.write_text(KERNEL_CU)
    keep = tmp_path / name
    keep.mkdir()
    cmd = [
        "nvcc",
        "-O3",
        "-gencode=arch=compute_90,code=sm_90",
        "-c",
        str(src),
        "-o",
        str(keep / "k.o"),
        "--keep",
        "--keep-dir",
        str(keep),
    ]
    r = subprocess.run(cmd, env={**os.environ, **env}, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    return {p.suffix: p.read_bytes() for p in keep.iterdir() if p.suffix in (".cubin", ".ptx", ".o")}


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc (no GPU)")
def test_the_device_code_is_the_same_at_any_host_level(tmp_path, monkeypatch):
    monkeypatch.setenv("KB_CU_HOST_OPT", "O0")
    env = {k: v for k, v in build_env(_cfg(tmp_path)).items() if k == "NVCC_APPEND_FLAGS"}
    own, cut = _nvcc_keep(tmp_path, "own", {}), _nvcc_keep(tmp_path, "cut", env)
    assert own[".cubin"] == cut[".cubin"] and own[".ptx"] == cut[".ptx"]
    assert own[".o"] != cut[".o"]  # the host side did change: the flag reached the host compiler
