"""The three-judge comparison's own arithmetic (benchmarks/three_judges.py), on the CPU: which GPU
activities a profiled forward owns, and the figures drawn from finished rows. The GPU run itself
needs a CUDA GPU (docs/measurements.md, "Three judges")."""

from __future__ import annotations

import importlib.util
import json
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(scope="module")
def tj():
    spec = importlib.util.spec_from_file_location("three_judges", os.path.join(ROOT, "benchmarks", "three_judges.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _ev(cat, name, ts, dur, corr=None):
    e = {"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur}
    if corr is not None:
        e["args"] = {"correlation": corr}
    return e


def test_a_forward_owns_what_runs_between_its_start_and_the_following_sync(tmp_path, tj):
    events = [
        # call 0: flush (before the annotation), two kernels with a gap, then the sync
        _ev("kernel", "fill_flush", 0, 50, 1),
        _ev("cuda_runtime", "cudaDeviceSynchronize", 10, 45),
        _ev("user_annotation", "judge_fwd_0", 100, 30),
        _ev("cuda_runtime", "cudaLaunchKernel", 105, 5, 2),
        _ev("cuda_driver", "cuLaunchKernelEx", 115, 5, 3),
        _ev("kernel", "a", 120, 40, 2),
        _ev("kernel", "b", 200, 60, 3),
        _ev("cuda_runtime", "cudaDeviceSynchronize", 131, 140),
        # call 1: the next flush runs after that sync and must not count
        _ev("kernel", "fill_flush", 280, 50, 4),
        _ev("cuda_runtime", "cudaDeviceSynchronize", 281, 60),
        _ev("user_annotation", "judge_fwd_1", 400, 20),
        _ev("cuda_runtime", "cudaLaunchKernel", 405, 5, 5),
        _ev("kernel", "a", 415, 35, 5),
        _ev("cuda_runtime", "cudaDeviceSynchronize", 421, 40),
    ]
    path = tmp_path / "trace.json"
    path.write_text(json.dumps({"traceEvents": events}))
    got = tj._gpu_activities(str(path), "judge_fwd_")
    assert got == [(100, 140, 2, 2), (35, 35, 1, 1)]


def _row(ours, kb, work, event_share=1.0, problem="p"):
    side = {"work_ms": 1.0, "span_ms": 1.0, "event_median_ms": 1.0 / event_share}
    return {
        "level": 1,
        "problem": problem,
        "ours": {"status": "correct", "speedup": ours},
        "kb": {"correct": True, "speedup": kb, "speedup_median": kb},
        "prof": {
            "speedup_work": work,
            "speedup_span": work,
            "speedup_event_median": work,
            "kernel": side,
            "reference": side,
        },
    }


def test_figures_count_disagreements_and_keep_launch_bound_rows_apart(tj):
    rows = [
        _row(1.00, 1.01, 1.00, problem="a"),
        _row(2.00, 2.02, 1.98, problem="b"),
        _row(1.00, 1.20, 1.10, event_share=0.5, problem="c"),
    ]
    f = tj.figures(rows)
    assert f["ours_vs_prof_work"]["n"] == 3
    assert f["ours_vs_prof_work_gpu_bound"]["n"] == 2  # "c" is launch-bound: the GPU idles half the call
    assert f["ours_vs_prof_work_gpu_bound"]["over_5pct"] == 0
    assert [o["kernel"] for o in f["over_5pct"]] == ["level1/c"]
    assert f["verdicts"] == {"both_correct": 3, "ours_only": 0, "kb_only": 0, "neither": 0}
    assert "over 5%" in tj.format_figures(f)
