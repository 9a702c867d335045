"""Shared helpers for the evaluation and adversarial suites (no database, no Django)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from evaluation import EvaluationConfig, EvaluationResult, evaluate

ROOT = Path(__file__).resolve().parents[2]
EVAL_PROBLEMS = ROOT / "tests" / "evaluation" / "problems"
ADV = ROOT / "tests" / "adversarial"
ADV_PROBLEMS = ADV / "problems"
ADV_KERNELS = ADV / "kernels"
CATALOGUE = ROOT / "problems" / "catalogue"

has_cuda = False
try:  # checking availability in the test process is fine: tests are not the worker
    import torch

    has_cuda = torch.cuda.is_available()
except ImportError:  # pragma: no cover
    pass

needs_cuda = pytest.mark.skipif(not has_cuda, reason="needs a CUDA GPU (runs on the H200 via benchmarks/gpu)")
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="uid/namespace isolation needs root")


def read(path: Path | str) -> str:
    return Path(path).read_text()


def self_kernel(problem_src: str) -> str:
    """The reference rewritten as a kernel (class Model -> class ModelNew)."""
    return problem_src.replace("class Model(", "class ModelNew(")


def run(problem: Path | str, kernel_src: str, **kw: Any) -> EvaluationResult:
    kw.setdefault("correctness_trials", 3)
    kw.setdefault("timing_trials", 5)
    kw.setdefault("seed", 1234)
    kw.setdefault("timeout_s", 120)
    kw.setdefault("round_target_s", 0.01)
    kw.setdefault("cpu_threads", 1)  # steadier timings on small, shared CI machines
    return evaluate(read(problem), kernel_src, EvaluationConfig(**kw))


def naive(problem: Path | str, kernel: Path | str, *args: str, scale: int = 1) -> dict[str, Any]:
    """Run the deliberately naive in-process harness on an exploit (in its own interpreter)."""
    env = {**os.environ, "KB_SCALE": str(scale)}
    out = subprocess.run(
        [sys.executable, str(ADV / "naive_harness.py"), str(problem), str(kernel), *args],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])
