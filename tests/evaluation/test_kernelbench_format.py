"""KernelBench's own result fields: `python -m evaluation evaluate --json-format kernelbench` and
the eval_results.json entry, in the shapes of KernelBench's KernelExecResult and
scripts/eval_from_generations.py."""

from __future__ import annotations

import json

from evaluation.results.kernelbench_format import eval_results_entry, to_kernelbench
from tests.evaluation.helpers import EVAL_PROBLEMS, read, self_kernel
from tests.evaluation.test_cli_and_api import cli

MATMUL = EVAL_PROBLEMS / "matmul_small.py"
KERNELBENCH_FIELDS = {
    "compiled",
    "correctness",
    "metadata",
    "runtime",
    "runtime_stats",
    "ref_runtime",
    "ref_runtime_stats",
}
TIMING = {"median": 1.0, "mean": 1.2, "std": 0.1, "min": 0.9, "max": 1.5, "trials": 20, "samples": [1.0]}


def result(**changes) -> dict:
    base = {
        "status": "correct", "compiled": True, "correct": True, "speedup": 2.0, "speedup_interval": [1.9, 2.1],
        "kernel_ms": TIMING, "reference_ms": TIMING | {"mean": 2.4}, "trials_passed": 5, "trials_total": 5,
        "flags": [], "error": None, "max_abs_diff": 1e-6, "environment": {"device_name": "NVIDIA H200", "device": "cuda"},
    }  # fmt: skip
    return base | changes


def test_a_correct_result_has_kernelbenchs_fields_in_milliseconds():
    fields = to_kernelbench(result())
    assert set(fields) == KERNELBENCH_FIELDS
    assert fields["runtime"] == 1.2 and fields["ref_runtime"] == 2.4  # KernelBench's runtime is the mean
    assert fields["runtime_stats"] == {
        "mean": 1.2, "std": 0.1, "min": 0.9, "max": 1.5, "num_trials": 20, "hardware": "NVIDIA H200", "device": "cuda",
    }  # fmt: skip
    assert fields["metadata"]["correctness_trials"] == "(5 / 5)"
    assert fields["metadata"]["leaderboard_speedup"] == 2.0


def test_failures_file_their_error_where_kernelbench_does():
    compile_error = to_kernelbench(result(status="compile_error", compiled=False, correct=False, error="nvcc: boom"))
    assert compile_error["metadata"]["compilation_error"] == "nvcc: boom"
    assert compile_error["runtime"] == -1.0 and compile_error["runtime_stats"] == {}
    wrong = to_kernelbench(result(status="incorrect", correct=False, error="output mismatch"))
    assert wrong["metadata"]["correctness_issue"] == "output mismatch" and wrong["correctness"] is False


def test_an_eval_results_entry_is_what_eval_from_generations_appends():
    entry = eval_results_entry(result(), sample_id=3)
    assert list(entry) == ["sample_id", "compiled", "correctness", "metadata", "runtime", "runtime_stats"]
    assert entry["sample_id"] == 3


def test_the_cli_prints_kernelbench_fields(tmp_path):
    kernel = tmp_path / "k.py"
    kernel.write_text(self_kernel(read(MATMUL)))
    out = cli("evaluate", "--problem", str(MATMUL), "--kernel", str(kernel), "--json-format", "kernelbench",
              "--timing-trials", "3", "--correctness-trials", "2", "--seed", "7", "--timeout", "120")  # fmt: skip
    assert out.returncode == 0, out.stderr
    fields = json.loads(out.stdout)
    assert set(fields) == KERNELBENCH_FIELDS
    assert fields["correctness"] is True and fields["runtime"] > 0 and fields["runtime_stats"]["num_trials"] >= 3
