"""Throughput of one evaluation worker: N kernels through one `evalworker --burst`, then the same N
again (their second evaluation must reuse the build). Prints jobs per minute and where the time
goes: queue wait, worker start, process start, build, correctness, timing, database.

    python benchmarks/worker_throughput.py [--kernels 6] [--workers N] [--device cpu|cuda] [--fake]

Starts its own redis-server on a free port and uses a throwaway SQLite database unless REDIS_URL /
DATABASE_URL are set. `--fake` replaces the scoring with tests/integration/fake_evaluation.py to
measure the queueing overhead alone.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

TORCH_KERNEL = '''
import torch
import torch.nn as nn

class ModelNew(nn.Module):
    """Variant {i}: the same matmul, written differently."""

    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        return torch.mm(A, B) * {one}
'''

# A C++ extension (built with g++ through torch.utils.cpp_extension.load_inline): its first
# evaluation compiles, its second must load the cached build.
CPP_KERNEL = r'''
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = """
#include <torch/extension.h>
torch::Tensor matmul_{i}(torch::Tensor a, torch::Tensor b) {{ return at::mm(a, b); }}
"""
module = load_inline(name="kb_bench_mm_{i}", cpp_sources=cpp_source, functions=["matmul_{i}"], verbose=False)

class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        return module.matmul_{i}(A, B)
'''


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_redis(workdir: str, binary: str) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    proc = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", workdir],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            time.sleep(0.05)
    return proc, f"redis://127.0.0.1:{port}/0"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kernels", type=int, default=6, help="distinct kernels (one of them a C++ extension)")
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--scale", type=int, default=1, help="KB_SCALE for the problem (16 on an H200)")
    parser.add_argument("--fake", action="store_true", help="fake scoring: measure the queueing alone")
    parser.add_argument("--no-cpp", action="store_true", help="torch-only kernels (no C++ build)")
    parser.add_argument("--redis-server", default=shutil.which("redis-server") or "/usr/bin/redis-server")
    parser.add_argument("--timing-trials", type=int, default=5)
    parser.add_argument("--workers", type=int, default=1, help="worker processes of the one evalworker")
    args = parser.parse_args()

    tmp = tempfile.mkdtemp(prefix="kb-bench-")
    redis_proc = None
    if not os.environ.get("REDIS_URL"):
        redis_proc, os.environ["REDIS_URL"] = start_redis(tmp, args.redis_server)
    os.environ.setdefault("DATABASE_URL", f"sqlite:///{tmp}/bench.sqlite3")
    os.environ.setdefault("KB_VAR_DIR", tmp)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ["EVAL_TIMING_TRIALS"] = str(args.timing_trials)
    os.environ["EVAL_SIZE_SCALE"] = str(args.scale)
    os.environ.setdefault("KB_BUILD_CACHE", os.path.join(tmp, "build-cache"))
    if args.fake:
        os.environ["EVAL_FUNCTION"] = "tests.integration.fake_evaluation.evaluate"
    try:
        return run(args, tmp)
    finally:
        if redis_proc:
            redis_proc.kill()
        shutil.rmtree(tmp, ignore_errors=True)


STAGE_NAMES = [
    ("queue wait (submit -> claimed)", "queue_wait"),
    ("evaluation: process start", "eval_process_start"),
    ("evaluation: load", "eval_load"),
    ("evaluation: build", "eval_build"),
    ("evaluation: correctness", "eval_correctness"),
    ("evaluation: timing", "eval_timing"),
    ("evaluation: total in library", "eval_total"),
    ("database: claim", "worker_db_claim"),
    ("database: load rows", "worker_db_load"),
    ("database: store result", "worker_db_store"),
]


def run(args: argparse.Namespace, tmp: str) -> int:
    import django

    django.setup()
    from django.core.management import call_command

    t0 = time.monotonic()
    call_command("migrate", verbosity=0)
    migrate_s = time.monotonic() - t0
    hardware, kernels = create_kernels(args)
    rounds = [
        run_round("first evaluation", args, hardware, kernels),
        run_round("second evaluation (same sources)", args, hardware, kernels),
    ]

    print(
        f"# worker throughput: {args.kernels} kernels, {args.workers} worker(s), device {args.device}, scale {args.scale}"
        f"{', FAKE scoring' if args.fake else ''}; host {socket.gethostname()}, {os.cpu_count()} CPUs"
    )
    print(f"(database migrate: {migrate_s:.1f} s, not counted)")
    for r in rounds:
        print_round(r, args)
    return 0


def create_kernels(args: argparse.Namespace) -> tuple[Any, list[Any]]:
    """The problem, the hardware the worker will register, a run and its kernels: (hardware, kernels)."""
    # deferred: the models import only once run() has set Django up
    from leaderboard.models import Kernel, LanguageModel, Run
    from problems.models import Hardware, Problem, ProblemSet

    slug = "cpu" if args.device == "cpu" else None
    problem_source = (REPO / "problems/catalogue/level1/1_Square_matrix_multiplication.py").read_text()
    problem_set = ProblemSet.objects.create(slug="bench", name="Benchmark")
    problem = Problem.objects.create(problem_set=problem_set, level=1, number=1, name="Matmul", source=problem_source)

    # The worker registers its hardware; find out which before submitting (GPU slug, e.g. h200).
    if slug is None:
        from evaluation import probe_hardware

        slug = probe_hardware("cuda").get("hardware_slug") or "cuda"
    hardware, _ = Hardware.objects.get_or_create(
        slug=slug, defaults={"name": slug, "kind": Hardware.Kind.CPU if slug == "cpu" else Hardware.Kind.GPU}
    )
    model = LanguageModel.objects.create(name="Benchmark model")
    run = Run.objects.create(model=model, problem_set=problem_set, hardware=hardware)
    sources = [TORCH_KERNEL.format(i=i, one="1.0" + "0" * i) for i in range(args.kernels)]
    if not args.no_cpp and args.kernels > 0:
        sources[-1] = CPP_KERNEL.format(i=args.kernels)
    kernels = [Kernel.objects.create(run=run, problem=problem, sample_index=i, source=s) for i, s in enumerate(sources)]
    return hardware, kernels


def run_round(label: str, args: argparse.Namespace, hardware: Any, kernels: list[Any]) -> dict:
    """Queue every kernel, run one `evalworker --burst` until the queue is empty, and read the rows back."""
    # deferred: the models import only once run() has set Django up
    from django.db import transaction

    from leaderboard.evaluations.queue import request_evaluation
    from leaderboard.models import Evaluation

    with transaction.atomic():
        evaluations = [request_evaluation(k, hardware) for k in kernels]
    started = time.monotonic()
    worker = subprocess.run(
        [
            sys.executable,
            "manage.py",
            "evalworker",
            "--burst",
            "--device",
            args.device,
            "--queue",
            hardware.queue_name,
            "--workers",
            str(args.workers),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        env=os.environ,
    )
    wall = time.monotonic() - started
    if worker.returncode != 0:
        print(worker.stdout[-3000:], worker.stderr[-3000:])
        raise SystemExit(f"worker failed ({label})")
    rows = list(Evaluation.objects.filter(pk__in=[e.pk for e in evaluations]).order_by("pk"))
    first_start = min(r.started_at for r in rows)
    worker_start = (first_start - max(r.queued_at for r in rows)).total_seconds()
    return {"label": label, "rows": rows, "wall": wall, "worker_start": worker_start, "log": worker.stderr}


def print_round(r: dict, args: argparse.Namespace) -> None:
    """One round's jobs per minute, its stage table and what its builds reused."""
    rows = r["rows"]
    states = {s: sum(1 for x in rows if x.state == s) for s in {x.state for x in rows}}
    busy = [(x.finished_at - x.started_at).total_seconds() for x in rows if x.finished_at and x.started_at]
    print(
        f"\n## {r['label']}: {len(rows)} jobs in {r['wall']:.1f} s wall "
        f"= {60 * len(rows) / r['wall']:.1f} jobs/min (worker start included); states {states}"
    )
    print(f"worker start (process, Django, hardware probe, Redis) until first claim: {r['worker_start']:.2f} s")
    if busy:
        print(
            f"job time claimed -> stored: mean {statistics.mean(busy):.3f} s, "
            f"{60 * len(busy) / sum(busy):.1f} jobs/min per worker excluding worker start"
        )
        span = (max(x.finished_at for x in rows) - min(x.started_at for x in rows)).total_seconds()
        print(f"all workers, first claim -> last store: {span:.1f} s = {60 * len(rows) / span:.1f} jobs/min")
    print_stages(rows, busy)
    cached = [x.stage_seconds.get("build_cached") for x in rows]
    print(f"builds reused from cache: {sum(1 for c in cached if c)} of {len(rows)}")
    if not args.no_cpp and not args.fake:
        cpp = rows[-1]
        print(
            f"C++ extension kernel: status {cpp.status}, build {cpp.stage_seconds.get('eval_build')} s, "
            f"cached {cpp.stage_seconds.get('build_cached')}"
        )


def print_stages(rows: list[Any], busy: list[float]) -> None:
    """Mean and max seconds of each stage, and the worker's own overhead around the library."""
    print("| stage | mean s | max s |")
    print("| --- | --- | --- |")
    for name, key in STAGE_NAMES:
        values = [x.stage_seconds.get(key) for x in rows if isinstance(x.stage_seconds.get(key), int | float)]
        if values:
            print(f"| {name} | {statistics.mean(values):.4f} | {max(values):.4f} |")
    overhead = [
        b - x.stage_seconds.get("worker_evaluate", 0)
        for x, b in zip(rows, busy, strict=False)
        if isinstance(x.stage_seconds.get("worker_evaluate"), int | float)
    ]
    if overhead:
        print(
            f"| worker overhead (fork, claim, heartbeat, store) | {statistics.mean(overhead):.4f} | "
            f"{max(overhead):.4f} |"
        )


if __name__ == "__main__":
    raise SystemExit(main())
