"""The instruments' judgements (evaluation/instruments/), on figures made up here: no process, no
torch needed for most."""

from __future__ import annotations

import types

import pytest

from evaluation.instruments import determinism, precision, profile, roofline, shapes

H200 = roofline.PEAKS["h200"]
# A 4096^3 fp32 matmul: 3 * 64 MiB moved (its FLOPs are the reference's algorithm, not the bound).
MATMUL_WORK = {"input_bytes": 2 * 4096 * 4096 * 4, "param_bytes": 0, "output_bytes": 4096 * 4096 * 4}
DIAG_MATMUL = """
import torch
import torch.nn as nn
N = 4096
M = 4096


class Model(nn.Module):
    def forward(self, A, B):
        return torch.diag(A) @ B


def get_inputs():
    return [torch.randn(N), torch.randn(N, M)]


def get_init_inputs():
    return []
"""


def test_a_faked_kernel_time_below_the_speed_of_light_is_impossible():
    sol_ms = 3 * 4096 * 4096 * 4 / H200["bytes_per_s"] * 1e3
    record, flag = roofline.assess(MATMUL_WORK, kernel_ms=sol_ms / 3, reference_ms=1.5, peaks=H200)
    assert record["impossible"] and record["kernel_fraction"] > 2.9 and record["bound"] == "memory"
    assert flag is not None and "physically impossible" in flag
    honest, none = roofline.assess(MATMUL_WORK, kernel_ms=0.35, reference_ms=1.5, peaks=H200)
    assert none is None and 0 < honest["kernel_fraction"] < 1 and not honest["impossible"]
    zero, flag = roofline.assess(MATMUL_WORK, kernel_ms=0.0, reference_ms=1.5, peaks=H200)
    assert zero["impossible"] and flag is not None  # a reported time of zero too


def test_an_algorithm_cheaper_than_the_references_is_not_impossible():
    # diag(A) @ B done as a row scaling (KernelBench level 1 problem 12): it reads B and writes the
    # output once, at 90% of the H200's bandwidth. The reference's dense matmul (137 GFLOP) is not
    # the problem's least work: the bound is its bytes.
    torch = pytest.importorskip("torch")
    problem = types.ModuleType("diag_problem")
    exec(compile(DIAG_MATMUL, "diag_problem.py", "exec"), problem.__dict__)
    work = roofline.minimum_work(torch, problem, lambda xs: xs, None)
    assert work["counted_on"] == "meta" and "flops" not in work
    nbytes = 4 * (4096 + 2 * 4096 * 4096)
    honest_ms = nbytes / (0.9 * H200["bytes_per_s"]) * 1e3
    record, flag = roofline.assess(work, kernel_ms=honest_ms, reference_ms=3.0, peaks=H200)
    assert flag is None and record["bytes"] == nbytes and 0.85 < record["kernel_fraction"] < 0.95
    _, faked = roofline.assess(work, kernel_ms=honest_ms / 4, reference_ms=3.0, peaks=H200)
    assert faked is not None  # a time below what reading B takes still is


def test_no_kernel_is_flagged_where_the_reference_itself_beats_the_bound():
    record, flag = roofline.assess(MATMUL_WORK, kernel_ms=0.01, reference_ms=0.02, peaks=H200)
    assert flag is None and record["bound_holds"] is False


def test_no_peaks_no_fractions():
    record, flag = roofline.assess(MATMUL_WORK, 0.01, 1.0, roofline.peaks_for("cpu", None))
    assert flag is None and record["peaks"] is None and record["bytes"] == 3 * 4096 * 4096 * 4
    assert roofline.peaks_for("cpu", {"bytes_per_s": 1.0, "flops_per_s": 1.0}) == {
        "bytes_per_s": 1.0,
        "flops_per_s": 1.0,
    }


def test_a_cpus_bandwidth_is_measured_once_per_host_and_kept_in_the_cache(tmp_path):
    calls = []

    def measure():
        calls.append(1)
        return 20e9

    first = roofline.cpu_peaks(str(tmp_path), "Some CPU", 2, measure)
    again = roofline.cpu_peaks(str(tmp_path), "Some CPU", 4, measure)
    assert calls == [1] and (tmp_path / roofline.HOST_PEAKS_FILE).exists()
    assert first["bytes_per_s"] == 20e9 * 2 * roofline.CPU_SAFETY and again["bytes_per_s"] == 2 * first["bytes_per_s"]
    (tmp_path / roofline.HOST_PEAKS_FILE).write_text("{not json")
    assert roofline.cpu_peaks(str(tmp_path), "Some CPU", 1, measure)["copy_bytes_per_s"] == 20e9 and len(calls) == 2
    assert roofline.cpu_peaks(str(tmp_path / "none"), "Other", 1, lambda: float("nan")) is None


def test_the_profile_summary_gives_busy_share_and_host_gaps():
    spans = [("gemm", "kernel", 100.0, 140.0), ("relu", "kernel", 150.0, 160.0), ("copy", "gpu_memcpy", 155.0, 170.0)]
    s = profile.summarise(spans)
    assert s["span_us"] == 70.0 and s["busy_us"] == 60.0 and s["busy_share"] == round(60 / 70, 4)
    assert s["gaps"] == {"count": 1, "total_us": 10.0, "max_us": 10.0}
    assert [e["name"] for e in s["events"]] == ["gemm", "relu", "copy"] and s["events"][1]["start_us"] == 50.0
    assert profile.summarise([])["activities"] == 0


def test_size_constants_are_the_sizes_get_inputs_reads():
    src = (
        "batch_size = 16\ndim = 4096\nkernel_size = 3\nnum_heads = 8\nother = 999\nflag = True\n"
        "def get_inputs():\n    return [batch_size, dim, kernel_size, num_heads, flag]\n"
        "def get_init_inputs():\n    return [kernel_size]\n"
    )
    module = types.ModuleType("problem")
    exec(src, vars(module))
    sizes = shapes.size_constants(module)
    assert sizes == {"batch_size": 16, "dim": 4096}  # hyper-parameters, unread and small constants left out
    assert shapes.variants(sizes) == [
        ("halved", {"batch_size": 8, "dim": 2048}),
        ("odd", {"batch_size": 13, "dim": 3073}),
    ]
    originals: dict = {}
    shapes.apply_sizes(module, {"batch_size": 8}, originals)
    assert module.get_inputs()[0] == 8
    shapes.apply_sizes(module, {}, originals)
    assert module.get_inputs()[0] == 16


def test_the_shape_flag_names_the_sizes_that_failed():
    ok = {"label": "halved", "sizes": {"N": 64}, "verdict": "correct", "detail": ""}
    skipped = {"label": "odd", "sizes": {"N": 97}, "verdict": "not_applicable", "detail": "reference fails"}
    assert shapes.judge([ok, skipped]) is None
    failed = {**skipped, "verdict": "incorrect", "detail": "3 elements outside tolerance"}
    assert "odd (N=97): 3 elements" in (shapes.judge([ok, failed]) or "")


def test_precision_needs_both_a_large_error_and_a_large_ratio():
    tf32 = {"kernel_rel_l2": 4e-4, "reference_rel_l2": 1e-7, "kernel_max_abs": 0.01, "reference_max_abs": 1e-5}
    record, flag = precision.judge(tf32, {"matmul_allow_tf32": True}, {"matmul_allow_tf32": False})
    assert record["downgrade"] and flag and "matmul_allow_tf32=True" in flag
    # an ill-conditioned problem: the fp32 reference errs as much as the kernel
    record, flag = precision.judge({**tf32, "reference_rel_l2": 1e-4}, {}, {})
    assert flag is None and not record["downgrade"]
    # an honest kernel summing in another order: many times the reference's error, still tiny
    record, flag = precision.judge({**tf32, "kernel_rel_l2": 5e-6}, {}, {})
    assert flag is None
    assert precision.judge({"skipped": "not float32"}, {}, {}) == ({"skipped": "not float32"}, None)


def test_determinism_compares_digests():
    assert determinism.judge(["a", "b"], ["a", "b"], (0.0, 0.0))[1] is None
    record, flag = determinism.judge(["a", "b"], ["a", "c"], (1e-6, 2e-6))
    assert not record["identical"] and flag and "1 of 2 output(s)" in flag
