"""nvcc's own steps run side by side (``evaluation/builds/nvcc_split``, ``evaluation.builds.nvcc_steps``), with
nvcc and no GPU: the object is the one nvcc makes from the same steps, byte for byte; the dependency
file names what the source includes; a compile error reads as nvcc's; what is not one ``.cu`` for one
architecture goes to nvcc itself; the switch reaches the build's environment and key."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from evaluation.builds import nvcc_steps
from evaluation.builds.entry import build_key
from evaluation.builds.stage import build_env
from evaluation.results.types import EvaluationConfig

pytestmark = pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc (no GPU)")
HEADER = "#pragma once\ninline __device__ float kb_two() { return 2.f; }\n"
SOURCE = """#include "kb_local.cuh"
__global__ void kb_scale(float* x, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] = x[i] * kb_two() + 1.f; }
void kb_launch(float* x, int n) { kb_scale<<<(n + 255) / 256, 256>>>(x, n); }
"""
ARCH = ["-gencode=arch=compute_90,code=sm_90"]


def _source(tmp_path, text: str = SOURCE) -> str:
    (tmp_path / "kb_local.cuh").write_text(HEADER)
    (tmp_path / "k.cu").write_text(text)
    return str(tmp_path / "k.cu")


def _split(tmp_path, *argv: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KB_REAL_NVCC": nvcc_steps.real_nvcc()}
    return subprocess.run([nvcc_steps.SHIM, *argv], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)


def test_the_object_is_nvccs_own_from_the_same_steps(tmp_path):
    src = _source(tmp_path)
    r = _split(
        tmp_path,
        "--generate-dependencies-with-compile",
        "--dependency-output",
        "k.o.d",
        *ARCH,
        "-O3",
        "-c",
        src,
        "-o",
        "k.o",
    )
    assert r.returncode == 0, r.stderr
    assert not (tmp_path / "k.o.nvcc-steps").exists()  # its steps' folder is gone
    assert (tmp_path / "k.o.d").read_text().startswith("k.o: ") and "kb_local.cuh" in (tmp_path / "k.o.d").read_text()
    (tmp_path / "k.o.nvcc-steps").mkdir()  # nvcc itself, its steps' files named alike (they are in the object)
    subprocess.run(
        [nvcc_steps.real_nvcc(), *ARCH, "-O3", "-c", src, "-o", "nvcc.o", "--keep", "--keep-dir", "k.o.nvcc-steps"],
        cwd=tmp_path,
        check=True,
        capture_output=True,
        timeout=600,
    )
    assert (tmp_path / "k.o").read_bytes() == (tmp_path / "nvcc.o").read_bytes()


def test_a_compile_error_reads_as_nvccs(tmp_path):
    src = _source(tmp_path, SOURCE.replace("kb_two()", "kb_three()"))
    split = _split(tmp_path, *ARCH, "-c", src, "-o", "k.o")
    own = subprocess.run(
        [nvcc_steps.real_nvcc(), *ARCH, "-c", src, "-o", "k.o"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert split.returncode == own.returncode != 0
    assert split.stderr.count('identifier "kb_three" is undefined') == 1 == own.stderr.count('kb_three" is undefined')


def test_when_cicc_cannot_name_the_module_itself_nvccs_order_is_run(tmp_path, monkeypatch):
    src = _source(tmp_path)
    monkeypatch.chdir(tmp_path)
    plan = nvcc_steps.plan_for(nvcc_steps.real_nvcc(), [*ARCH, "-c", src, "-o", "k.o"])
    assert plan is not None and "--gen_module_id_file" in plan.device[1]
    plan.device[1] = "false"  # the device chain fails: run again as nvcc runs it
    assert nvcc_steps.run_plan(plan) == 0 and (tmp_path / "k.o").stat().st_size > 0


def test_other_shapes_go_to_nvcc_itself(tmp_path, monkeypatch):
    src = _source(tmp_path)
    monkeypatch.chdir(tmp_path)
    two_archs = [*ARCH, "-gencode=arch=compute_80,code=sm_80", "-c", src, "-o", "k.o"]
    assert nvcc_steps.plan_for(nvcc_steps.real_nvcc(), two_archs) is None
    assert nvcc_steps.plan_for(nvcc_steps.real_nvcc(), [*ARCH, "-rdc=true", "-c", src, "-o", "k.o"]) is None
    assert _split(tmp_path, *two_archs).returncode == 0 and (tmp_path / "k.o").exists()


def test_the_switch_names_the_shim_in_the_builds_environment_and_key(tmp_path, monkeypatch):
    monkeypatch.setenv("KB_PCH", "0")
    cfg = EvaluationConfig(device="cuda", build_cache_dir=str(tmp_path), cuda_arch="9.0")
    monkeypatch.delenv("KB_NVCC_SPLIT", raising=False)
    off = build_env(cfg), build_key("src", "cuda", "9.0")
    monkeypatch.setenv("KB_NVCC_SPLIT", "1")
    assert "PYTORCH_NVCC" not in off[0] and build_env(cfg)["PYTORCH_NVCC"] == nvcc_steps.SHIM
    assert build_key("src", "cuda", "9.0") != off[1]
