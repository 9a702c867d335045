"""Pure functions: statistics, comparison, static checks, configuration, result shape."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import pytest
import torch

from evaluation import STATUSES, EvaluationConfig, EvaluationResult
from evaluation.phases.compare import compare_outputs, spot_miss, spots_match, tolerances_for
from evaluation.phases.static_checks import analyse, detect_backend
from evaluation.results.stats import bootstrap_speedup_ci, median, summary
from evaluation.results.types import FLAG_CODES, NOTE_CODES
from evaluation.runner import derive_seed, hardware_slug
from evaluation.sandbox.isolation import compute_masks
from tests.evaluation.helpers import ROOT

RESULT_KEYS = {
    "instruments",
    "status",
    "compiled",
    "correct",
    "speedup",
    "speedup_interval",
    "kernel_ms",
    "reference_ms",
    "max_abs_diff",
    "max_rel_diff",
    "trials_passed",
    "trials_total",
    "flags",
    "notes",
    "error",
    "log",
    "timings_s",
    "environment",
    "build_cached",
    "backend",
    "seed",
    "device",
}


def test_statuses():
    assert STATUSES == ("correct", "incorrect", "compile_error", "runtime_error", "timeout", "crashed")


def test_median_and_summary():
    assert median([3, 1, 2]) == 2
    assert median([4, 1, 2, 3]) == 2.5
    s = summary([1.0, 2.0, 3.0], trials=30)
    assert s["median"] == 2.0 and s["mean"] == 2.0 and s["min"] == 1.0 and s["max"] == 3.0
    assert s["std"] == pytest.approx(1.0) and s["trials"] == 30 and s["samples"] == [1.0, 2.0, 3.0]


def test_bootstrap_interval():
    ref = [2.0, 2.1, 1.9, 2.0, 2.05, 1.95] * 3
    ker = [1.0, 1.02, 0.98, 1.0, 1.01, 0.99] * 3
    lo, hi = bootstrap_speedup_ci(ref, ker)
    assert lo <= 2.0 <= hi and hi - lo < 0.3
    lo, hi = bootstrap_speedup_ci([1.0] * 5, [1.0] * 5)
    assert lo == hi == 1.0


def test_tolerances_by_dtype():
    assert tolerances_for("float32", None, None) == (1e-4, 1e-4)
    assert tolerances_for("float16", None, None) == (1e-2, 1e-2)
    assert tolerances_for("bfloat16", None, 5e-3) == (1e-2, 5e-3)


def test_compare_outputs():
    r = torch.randn(50, 50)
    assert compare_outputs([r], [r.clone()], None, None).ok
    assert not compare_outputs([r], [r + 1e-3], None, None).ok
    assert compare_outputs([r], [r + 1e-3], 1e-2, 1e-2).ok
    c = compare_outputs([r], [r[:-1]], None, None)
    assert not c.ok and "shape" in c.reason
    c = compare_outputs([r], [r.double()], None, None)
    assert not c.ok and "dtype" in c.reason
    bad = r.clone()
    bad[3, 3] = float("nan")
    c = compare_outputs([r], [bad], None, None)
    assert not c.ok and "NaN" in c.reason
    both = r.clone()
    both[0, 0] = float("nan")
    assert compare_outputs([both], [both.clone()], None, None).ok
    c = compare_outputs([r, r], [r], None, None)
    assert not c.ok and "output(s)" in c.reason
    h = torch.randn(10, dtype=torch.float16)
    assert compare_outputs([h], [h + 0.001], None, None).ok


def test_scale_aware_check():
    tiny = torch.randn(100, 100) * 1e-6
    c = compare_outputs([tiny], [torch.zeros_like(tiny)], None, None)
    assert not c.ok and c.near_zero and "scale" in c.reason
    assert compare_outputs([tiny], [torch.zeros_like(tiny)], None, None, scale_check=False).ok
    assert compare_outputs([tiny], [tiny * (1 + 1e-6)], None, None).ok
    zero = torch.zeros(10)
    c = compare_outputs([zero], [zero.clone()], None, None)
    assert c.ok and c.near_zero


def test_the_scale_check_ignores_rounding_in_the_subnormal_range():
    """A reduction that underflows (a product of 256 normals: outputs 0 and a few subnormals) done in
    another order differs by a few subnormal steps; that is no error. A zero output against a
    reference whose values are normal, however small, still fails."""
    step = 1.401298464324817e-45  # float32's smallest subnormal
    ref = torch.zeros(64, 64)
    ref[0, :8] = torch.tensor([3, 17, 100, 1000, 5, 9, 80, 2]) * step
    out = ref.clone()
    out[0, :8] += torch.tensor([1, -1, 1, 2, -1, 1, -1, 1]) * step
    c = compare_outputs([ref], [out], None, None)
    assert c.ok and c.near_zero, c.reason
    normal = torch.randn(64, 64) * 1e-30  # tiny, but above the subnormal range
    c = compare_outputs([normal], [torch.zeros_like(normal)], None, None)
    assert not c.ok and "scale" in c.reason
    half = (torch.randn(64, 64) * 1e-3).half()
    assert not compare_outputs([half], [torch.zeros_like(half)], None, None).ok
    # float16's subnormals are real values: a softmax over 393,216 elements (L1 23 in fp16) lies there.
    softmax = torch.softmax(torch.rand(2, 393216), dim=1).half()
    assert float(softmax.max()) < torch.finfo(torch.float16).tiny
    for fake in (torch.zeros_like(softmax), torch.full_like(softmax, 2.5e-6)):
        c = compare_outputs([softmax], [fake], None, None)
        assert not c.ok and "scale" in c.reason
    assert compare_outputs([torch.arange(10)], [torch.arange(10)], None, None).ok


def test_spots_match():
    assert spots_match([[1.0, 2.0]], [[1.0, 2.00001]], ["float32"], None, None)
    assert not spots_match([[1.0, 2.0]], [[1.0, 2.1]], ["float32"], None, None)
    assert spots_match([[math.nan]], [[math.nan]], ["float32"], None, None)
    assert not spots_match([[1.0]], [[math.nan]], ["float32"], None, None)


def test_static_analysis():
    assert detect_backend("import torch\n") == "torch"
    assert detect_backend("import triton\n@triton.jit\ndef k(): pass") == "triton"
    assert detect_backend("load_inline(name='x', cpp_sources=s, cuda_sources=c)\n__global__") == "cuda"
    assert detect_backend("from torch.utils.cpp_extension import load_inline\nload_inline(cpp_sources=s)") == "cpp"
    prob = "class Model:\n    def forward(self, x):\n        return x * 2\n"
    same = "class ModelNew:\n    def forward(self, x):\n        '''doc'''\n        return x * 2\n"
    a = analyse(same, prob)
    assert "fallback_to_reference" in [c for c, _ in a["flags"]]
    assert "pytorch_only" in [c for c, _ in a["notes"]]
    b = analyse("import gc\nclass ModelNew:\n    def forward(self, x):\n        gc.get_objects()\n", prob)
    assert "harness_memory_access" in [c for c, _ in b["flags"]]
    t = analyse(
        "class ModelNew:\n    def forward(self, x):\n        try:\n            pass\n        except Exception:\n"
        "            return x\n",
        prob,
    )
    assert "try_except_fallback" in [c for c, _ in t["notes"]]


def test_config_validation_and_defaults(monkeypatch):
    with pytest.raises(ValueError):
        EvaluationConfig(device="tpu")
    with pytest.raises(ValueError):
        EvaluationConfig(correctness_trials=0)
    c = EvaluationConfig()
    assert c.speedup_flag_threshold == 10.0 and c.size_scale == 1 and c.seed is None
    monkeypatch.setenv("KB_BUILD_CACHE", "/tmp/somewhere")
    assert EvaluationConfig().build_cache_dir == "/tmp/somewhere"


def test_result_to_dict_is_json():
    r = EvaluationResult(status="correct", speedup_interval=(0.9, 1.1))
    r.add_flag("excessive_speedup", "x")
    r.add_flag("excessive_speedup", "dup")
    d = r.to_dict()
    assert set(d) == RESULT_KEYS
    assert d["speedup_interval"] == [0.9, 1.1] and len(d["flags"]) == 1
    json.dumps(d)


def test_every_code_documented():
    doc = (ROOT / "docs" / "evaluation.md").read_text()
    for code in list(FLAG_CODES) + list(NOTE_CODES):
        assert f"`{code}`" in doc, code


def test_seeds_and_slugs():
    assert derive_seed(1, "correct", 0) != derive_seed(1, "correct", 1) != derive_seed(2, "correct", 1)
    assert derive_seed(5, "x") == derive_seed(5, "x")
    assert hardware_slug("NVIDIA H200", "cuda") == "h200"
    assert hardware_slug("NVIDIA H100 80GB HBM3", "cuda") == "h100"
    assert hardware_slug("NVIDIA A100-SXM4-80GB", "cuda") == "a100"
    assert hardware_slug("AMD EPYC", "cpu") == "cpu"


def test_masks():
    import shutil
    import tempfile

    base = tempfile.mkdtemp(dir="/tmp")
    try:
        os.chmod(base, 0o755)
        secret = os.path.join(base, "home")
        os.makedirs(os.path.join(secret, "venv"))
        os.chmod(secret, 0o700)
        masks = compute_masks([os.path.join(secret, "venv")], ())
        assert [secret, [os.path.join(secret, "venv")], None] in masks
        masks = compute_masks([], (base,))
        assert [base, [], None] in masks
        # A private /tmp is bound over the real one; needed paths below it are re-exposed.
        masks = compute_masks([os.path.join(base, "work")], (), {"/tmp": "/private/tmp"})
        assert masks == [["/tmp", [os.path.join(base, "work")], "/private/tmp"]]
    finally:
        shutil.rmtree(base)


def test_package_imports_no_django_and_no_torch():
    code = (
        f"import sys; sys.path.insert(0, {str(ROOT)!r}); import evaluation, evaluation.cli, evaluation.runner; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('django', 'leaderboard', 'problems', "
        "'config', 'torch')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
    for path in (ROOT / "evaluation").rglob("*.py"):
        text = path.read_text()
        assert "import django" not in text and "from django" not in text, path


_NET = """import torch
import torch.nn as nn


class Block(nn.Module):
    def __init__(self, c):
        super(Block, self).__init__()
        self.conv = nn.Conv2d(c, c, 3)

    def forward(self, x):
        return torch.relu(self.conv(x))


class Model(nn.Module):
    def __init__(self, c):
        super(Model, self).__init__()
        self.block = Block(c)

    def forward(self, x):
        return self.block(x)
"""


def _as_kernel(problem: str) -> str:
    return problem.replace("class Model(", "class ModelNew(").replace("super(Model,", "super(ModelNew,")


def _fallback(kernel: str, problem: str = _NET) -> bool:
    return "fallback_to_reference" in [c for c, _ in analyse(kernel, problem)["flags"]]


def test_a_kernel_that_is_the_reference_verbatim_falls_back():
    assert _fallback(_as_kernel(_NET))
    # Custom code it defines and never reaches changes nothing.
    unused = "from torch.utils.cpp_extension import load_inline\nop = load_inline(name='op', cpp_sources='')\n"
    assert _fallback(unused + _as_kernel(_NET))


def test_the_reference_forward_over_the_kernels_own_layers_is_no_fallback():
    # A level 3 network whose forward is the reference's while its blocks are the kernel's own.
    own_block = _as_kernel(_NET).replace("torch.relu(self.conv(x))", "fused_conv_relu(self.conv, x)")
    assert not _fallback(own_block)
    own_init = _as_kernel(_NET).replace("self.block = Block(c)", "self.block = FusedBlock(c)")
    assert not _fallback("class FusedBlock(Block):\n    pass\n" + own_init)
    assert not _fallback(_as_kernel(_NET).replace("import torch.nn as nn", "from torch import nn"))


def test_spot_miss_says_which_value_and_by_how_much():
    assert spot_miss([[1.0, 2.0]], [[1.0, 2.00001]], ["float32"], None, None) == ""
    miss = spot_miss([[1.0, 2.0]], [[1.0, 2.5]], ["float32"], 0.01, 0.01)
    assert miss == "output 0: 2.5 against 2 (allowed 0.03)"
    assert (
        spot_miss([[1.0], [3.0]], [[1.0], [math.nan]], ["float32", "float32"], None, None) == "output 1: nan against 3"
    )
    assert spot_miss([[1.0]], [[1.0], [2.0]], ["float32"], None, None) == "2 outputs against 1"
