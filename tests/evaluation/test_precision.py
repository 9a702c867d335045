"""KernelBench's precision option (fp32, fp16, bf16): the reference and the kernel models and their
floating-point inputs are cast to it, and the tolerances follow the outputs' dtype."""

from __future__ import annotations

import json

import pytest

from evaluation import EvaluationConfig, evaluate
from tests.evaluation.helpers import EVAL_PROBLEMS, read, self_kernel
from tests.evaluation.test_cli_and_api import cli

MATMUL = EVAL_PROBLEMS / "matmul_small.py"
# Correct only when its inputs arrive in bfloat16 (and the reference's output is bfloat16 too, or
# the outputs' dtypes differ and the comparison fails).
BF16_ONLY = self_kernel(read(MATMUL)).replace(
    "    def forward(self, a, b):\n",
    "    def forward(self, a, b):\n        if a.dtype != torch.bfloat16:\n            raise RuntimeError(f'got {a.dtype}')\n",
)


def quick(**options) -> EvaluationConfig:
    return EvaluationConfig(correctness_trials=2, timing_trials=2, seed=3, timeout_s=120, **options)


def test_an_unknown_precision_is_refused():
    with pytest.raises(ValueError, match="precision must be one of fp32, fp16, bf16"):
        EvaluationConfig(precision="fp8")


def test_bf16_casts_the_models_and_the_inputs():
    assert "def forward(self, a, b):\n        if a.dtype" in BF16_ONLY
    result = evaluate(read(MATMUL), BF16_ONLY, quick(precision="bf16"))
    assert result.status == "correct", (result.error, result.log[-2000:])
    as_fp32 = evaluate(read(MATMUL), BF16_ONLY, quick())
    assert as_fp32.status == "runtime_error" and "torch.float32" in (as_fp32.error or "")


def test_the_cli_takes_the_precision(tmp_path):
    kernel = tmp_path / "k.py"
    kernel.write_text(BF16_ONLY)
    out = cli("evaluate", "--problem", str(MATMUL), "--kernel", str(kernel), "--precision", "bf16", "--json",
              "--timing-trials", "2", "--correctness-trials", "2", "--seed", "5", "--timeout", "120")  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["status"] == "correct"
    assert cli("evaluate", "--problem", str(MATMUL), "--kernel", str(kernel), "--precision", "fp8").returncode == 2
