"""python -m evaluation sweep on the CPU over a small KernelBench-shaped folder."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from evaluation.sweep import Outcome, Task, find_tasks, format_summary, self_kernel, summarise
from tests.evaluation.helpers import EVAL_PROBLEMS, ROOT, read

SUPER = """import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super(Model, self).__init__()

    def forward(self, x):
        return x * 2.0

def get_inputs():
    return [torch.randn(32, 32)]

def get_init_inputs():
    return []
"""


def kb_tree(tmp_path: Path) -> Path:
    """KernelBench/level1 with two problems, level2 with one (the layout of the real checkout)."""
    base = tmp_path / "kb" / "KernelBench"
    (base / "level1").mkdir(parents=True)
    (base / "level2").mkdir()
    (base / "level1" / "1_add_one.py").write_text(read(EVAL_PROBLEMS / "add_one.py"))
    (base / "level1" / "10_double_super.py").write_text(SUPER)
    (base / "level2" / "1_matmul.py").write_text(read(EVAL_PROBLEMS / "matmul_small.py"))
    return tmp_path / "kb"


def cli(*args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run(
        [sys.executable, "-m", "evaluation", *args], capture_output=True, text=True, cwd=ROOT, env=env, timeout=400
    )


def test_self_kernel_renames_every_model_reference():
    src = self_kernel(SUPER)
    assert (
        "class ModelNew(nn.Module)" in src
        and "super(ModelNew, self)" in src
        and "Model(" not in src.replace("ModelNew(", "")
    )


def test_find_tasks_orders_by_number_and_filters(tmp_path):
    kb = kb_tree(tmp_path)
    tasks = find_tasks(str(kb), [1, 2])
    assert [(t.level, t.problem) for t in tasks] == [(1, "1_add_one"), (1, "10_double_super"), (2, "1_matmul")]
    assert [t.problem for t in find_tasks(str(kb), [1], patterns=["10_*"])] == ["10_double_super"]
    assert [t.problem for t in find_tasks(str(kb), [1, 2], patterns=["level2/*"])] == ["1_matmul"]
    kernels = tmp_path / "kernels"
    (kernels / "level1").mkdir(parents=True)
    (kernels / "level1" / "1_add_one.py").write_text("x = 1\n")
    (kernels / "level_2_problem_1_sample_0_kernel.py").write_text("x = 2\n")
    found = find_tasks(str(kb), [1, 2], kernels_dir=str(kernels))
    assert [(t.level, t.problem, Path(t.kernel_path or "").name) for t in found] == [
        (1, "1_add_one", "1_add_one.py"),
        (2, "1_matmul", "level_2_problem_1_sample_0_kernel.py"),
    ]


def test_summary_figures():
    def outcome(speedup: float | None, lo: float, hi: float, wall: float) -> Outcome:
        r = {
            "status": "correct" if speedup else "incorrect",
            "speedup": speedup,
            "speedup_interval": [lo, hi] if speedup else None,
            "timings_s": {"total": wall},
        }
        return Outcome(Task(1, "p", "p.py"), "0", r)

    s = summarise([outcome(1.01, 0.99, 1.03, 2.0), outcome(0.95, 0.93, 0.97, 4.0), outcome(None, 0, 0, 1.0)], 0.5, 2)
    assert s["evaluations"] == 3 and s["timed"] == 2 and s["statuses"] == {"correct": 2, "incorrect": 1}
    assert abs(s["self_error_median"] - 0.03) < 1e-9 and abs(s["self_error_max"] - 0.05) < 1e-9
    assert s["interval_covers_1"] == 1 and s["within_2pct"] == 1
    assert s["wall_median_s"] == 2.0 and s["wall_max_s"] == 4.0 and s["evals_per_min_per_gpu"] == 3.0
    assert "interval covers 1.0: 1/2" in format_summary(s)


def test_summary_breaks_the_held_time_down_by_part():
    t1 = {"total": 5.0, "build_wait": 1.0, "process_start": 0.8, "load": 0.4, "correctness": 0.6, "timing": 2.0}
    t2 = {"total": 3.0, "process_start": 0.6, "load": 0.2, "correctness": 0.4, "timing": 1.4}
    s = summarise([Outcome(Task(1, "p", "p.py"), "0", {"status": "correct", "timings_s": t}) for t in (t1, t2)], 0.5, 1)
    stages = s["stage_seconds"]
    assert stages["held"]["median"] == 3.5  # (5 - 1 waiting for the build) and 3
    assert stages["timing"]["median"] == 1.7 and stages["process_start"]["p90"] == 0.8
    assert stages["other"]["median"] == 0.3  # what the named parts do not explain: 0.2 and 0.4
    assert "held time by part" in format_summary(s) and "timing 1.70/" in format_summary(s)


def test_sweep_cli_on_cpu(tmp_path):
    kb = kb_tree(tmp_path)
    out = tmp_path / "res.jsonl"
    r = cli(
        "sweep",
        str(kb),
        "--levels",
        "1",
        "2",
        "--device",
        "cpu",
        "--workers",
        "2",
        "--timing-trials",
        "3",
        "--correctness-trials",
        "2",
        "--seed",
        "3",
        "--out",
        str(out),
        "--json",
    )
    assert r.returncode == 0, r.stderr
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted((d["level"], d["problem"]) for d in rows) == [
        (1, "10_double_super"),
        (1, "1_add_one"),
        (2, "1_matmul"),
    ]
    assert all(d["status"] == "correct" and d["kernel"] == "self" and "log" not in d for d in rows), rows
    assert "[3/3]" in r.stderr  # progress
    summary = json.loads(r.stdout.strip().splitlines()[-1])
    assert summary["evaluations"] == 3 and summary["timed"] == 3 and summary["gpus"] == 2
    assert "self-speedup error" in r.stdout and "evaluations per minute per worker" in r.stdout


def test_sweep_usage_errors(tmp_path):
    r = cli("sweep", str(tmp_path), "--levels", "1", "--device", "cpu")
    assert r.returncode == 2 and "no problems found" in r.stderr


def test_sweep_builds_kernels_in_the_pool_ahead_of_the_workers(tmp_path, monkeypatch):
    """Kernels that build (here: modules that name load_inline, so the build stage imports them in its
    own sandboxed process) are built by the pool; the workers find them built."""
    kb = kb_tree(tmp_path)
    kernels = tmp_path / "kernels" / "level1"
    kernels.mkdir(parents=True)
    for name in ("1_add_one", "10_double_super"):
        src = self_kernel(read(kb / "KernelBench" / "level1" / f"{name}.py"))
        (kernels / f"{name}.py").write_text("from torch.utils.cpp_extension import load_inline  # noqa\n" + src)
    out = tmp_path / "res.jsonl"
    monkeypatch.setenv("KB_BUILD_CACHE", str(tmp_path / "cache"))
    r = cli(
        "sweep",
        str(kb),
        "--levels",
        "1",
        "--device",
        "cpu",
        "--kernels",
        str(tmp_path / "kernels"),
        "--build-workers",
        "2",
        "--timing-trials",
        "2",
        "--correctness-trials",
        "1",
        "--out",
        str(out),
        "--json",
    )
    assert r.returncode == 0, r.stderr
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert all(d["status"] == "correct" for d in rows), rows
    assert all(d["prebuild"]["status"] == "built" and d["build_cached"] for d in rows), rows
    assert all("compile" not in d["timings_s"] for d in rows)  # no evaluation built its own
    summary = json.loads(r.stdout.strip().splitlines()[-1])
    assert summary["build_workers"] == 2 and summary["builds_in_evaluation"] == 0
    assert summary["builds"] == 2 and "builds: 2 by 2 build process(es)" in r.stdout


def test_a_sweep_of_kernels_ends_with_fast_p_not_self_speedup_error():
    # Issue 30: the figures of a self-sweep (how far from 1.0) mean nothing for kernels that are
    # not the reference; a sweep of kernels reports correctness and fast_p per level instead.
    def outcome(level: int, status: str, speedup: float | None, lo: float = 0.0) -> Outcome:
        r = {"status": status, "speedup": speedup, "speedup_interval": [lo, 9.0] if speedup else None,
             "timings_s": {"total": 1.0}}  # fmt: skip
        return Outcome(Task(level, "p", "p.py", kernel_path="k.py"), "0", r)

    s = summarise([outcome(1, "correct", 2.5, 2.1), outcome(1, "correct", 1.5, 0.9), outcome(1, "incorrect", None),
                   outcome(1, "compile_error", None), outcome(2, "correct", 0.5, 0.4)], 0.5, 1)  # fmt: skip
    assert s["kernels"] is True
    assert s["levels"]["1"] == {"kernels": 4, "correct": 2, "fast_0": 0.5, "fast_1": 0.5, "fast_2": 0.25,
                                "surely_faster": 1}  # fmt: skip
    text = format_summary(s)
    assert "self-speedup" not in text and "covers 1.0" not in text
    assert "level 1: 2/4 correct (fast_0 50.0%), fast_1 50.0%, fast_2 25.0% of the 4 kernels evaluated" in text
    assert "level 2: 1/1 correct" in text


def test_an_interrupted_sweep_leaves_no_sandbox_behind(tmp_path):
    """Ctrl-C (SIGINT to the sweep's process group) while it evaluates: the sandbox it evaluates in
    and the one it started ahead are both closed (their folders gone with their processes, which run
    in their own sessions, out of the interrupt's reach)."""
    kb = kb_tree(tmp_path)
    for n in range(2, 7):  # enough problems that the sweep is still going when it is interrupted
        (kb / "KernelBench" / "level1" / f"{n}_add_one.py").write_text(read(EVAL_PROBLEMS / "add_one.py"))
    work, out = tmp_path / "work", tmp_path / "results.jsonl"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {"KB_WORK_DIR": str(work)}
    sweep = subprocess.Popen(
        [sys.executable, "-m", "evaluation", "sweep", str(kb), "--levels", "1", "--device", "cpu",
         "--instruments", "none", "--out", str(out)],
        cwd=ROOT, env=env, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 300
        while not (out.exists() and out.read_text().strip()) and time.monotonic() < deadline:
            assert sweep.poll() is None, sweep.stderr.read()
            time.sleep(0.1)
        while len(list(work.iterdir())) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(list(work.iterdir())) >= 2, "one sandbox evaluating and one started ahead"
        os.killpg(sweep.pid, signal.SIGINT)
        sweep.wait(timeout=60)
    finally:
        if sweep.poll() is None:
            os.killpg(sweep.pid, signal.SIGKILL)
    assert len(out.read_text().splitlines()) < 7, "interrupted before its end"
    assert list(work.iterdir()) == [], sweep.stderr.read()
