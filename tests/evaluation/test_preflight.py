"""Problems that cannot run here end at once, saying why: a module this host lacks, pretrained
weights (KernelBench level 4), inputs larger than the memory limit."""

from __future__ import annotations

import time

from evaluation import EvaluationConfig, check_problem
from evaluation.phases.static_checks import pretrained_models, required_modules
from tests.evaluation.helpers import run, self_kernel
from tests.sources import HF_PROBLEM_SOURCE

MISSING = """import torch
import kb_no_such_module_xyz
from kb_no_such_module_xyz.sub import thing

class Model(torch.nn.Module):
    def forward(self, x):
        return x

def get_inputs():
    return [torch.randn(4)]

def get_init_inputs():
    return []
"""

HUGE = """import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)

batch_size = 4096
dim = 393216

def get_inputs():
    return [torch.rand(batch_size, dim)]

def get_init_inputs():
    return []
"""


def test_required_modules_and_pretrained_models():
    assert required_modules(MISSING) == ["torch", "kb_no_such_module_xyz"]
    assert required_modules(HF_PROBLEM_SOURCE) == ["torch", "transformers"]
    assert (
        required_modules(
            "import os, sys\nfrom __future__ import annotations\ntry:\n    import triton\nexcept "
            "ImportError:\n    pass\n"
        )
        == []
    )
    assert required_modules("this is not python(") == []
    assert pretrained_models(HF_PROBLEM_SOURCE) == ["EleutherAI/gpt-neo-2.7B"]
    assert pretrained_models(MISSING) == []


def test_missing_module_ends_at_once_naming_it(tmp_path):
    problem = tmp_path / "p.py"
    problem.write_text(MISSING)
    t0 = time.monotonic()
    res = run(problem, self_kernel(MISSING))
    assert res.status == "runtime_error" and "kb_no_such_module_xyz" in (res.error or ""), res.error
    assert time.monotonic() - t0 < 30


def test_level4_weights_end_at_once_naming_the_model(tmp_path):
    problem = tmp_path / "p.py"
    problem.write_text(HF_PROBLEM_SOURCE)
    res = run(problem, self_kernel(HF_PROBLEM_SOURCE))
    assert res.status == "runtime_error"
    assert "EleutherAI/gpt-neo-2.7B" in (res.error or "") or "transformers" in (res.error or ""), res.error


def test_inputs_over_the_memory_limit_are_refused_up_front(tmp_path):
    problem = tmp_path / "p.py"
    problem.write_text(HUGE)
    t0 = time.monotonic()
    res = run(problem, self_kernel(HUGE), memory_limit_mb=4096)
    assert res.status == "runtime_error", (res.status, res.error)
    assert "inputs need 6.0 GB" in (res.error or "") and "memory_limit_mb=4096" in (res.error or ""), res.error
    assert res.environment.get("input_mb") == 6144.0
    assert time.monotonic() - t0 < 60
    report = check_problem(HUGE, EvaluationConfig(memory_limit_mb=4096, timeout_s=120))
    assert not report["ok"] and "inputs need 6.0 GB" in report["error"], report["error"]
