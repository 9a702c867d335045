"""Several evaluation workers from one `evalworker`: how many a host runs well, and the processes.

`evalworker --workers N` (default `EVAL_WORKERS`, else `evaluation.sandbox.limits.workers_for(device)`
times `EVAL_WORKERS_PER_GPU` on a GPU host: that many per GPU it may use, one per 4 cores on the CPU)
with N > 1 starts N worker processes, each `evalworker --workers 1 --no-probe --no-sweep --no-prebuild`
on the same queues (on a GPU host each with one GPU in `CUDA_VISIBLE_DEVICES`, shared with the
others given it, which take turns on it: see `gpu_turn`), passes SIGTERM and SIGINT on to them,
and waits for all.
The parent keeps the one sweeper child (and, on a GPU host, the one builder) and does no work itself.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from evaluation.sandbox.limits import visible_gpus, workers_for


def default_worker_count(device: str) -> int:
    """`EVAL_WORKERS` when set, else what the host runs well for `device` ('cpu' or 'cuda'): on a GPU
    host `EVAL_WORKERS_PER_GPU` for each GPU (they take turns: leaderboard/evaluations/gpu_turn.py)."""
    per_device = settings.EVAL_WORKERS_PER_GPU if device == "cuda" else 1
    return settings.EVAL_WORKERS or workers_for(device) * per_device


@dataclass
class WorkerCommand:
    argv: list[str]
    env: dict[str, str]


def worker_commands(
    count: int, device: str, queues: list[str], name: str, options: dict[str, Any]
) -> list[WorkerCommand]:
    """The command line and environment of each of `count` single workers."""
    gpus = visible_gpus() if device == "cuda" else []
    commands = []
    for i in range(count):
        argv = [
            sys.executable,
            sys.argv[0],
            "evalworker",
            "--workers",
            "1",
            "--no-probe",
            "--no-sweep",
            "--no-prebuild",  # the parent runs the host's one builder
            "--device",
            device,
            "--name",
            f"{name}.w{i}",
        ]
        for queue in queues:
            argv += ["--queue", queue]
        if options.get("burst"):
            argv.append("--burst")
        if options.get("max_jobs") is not None:
            argv += ["--max-jobs", str(options["max_jobs"])]
        env = dict(os.environ)
        if gpus:
            env["CUDA_VISIBLE_DEVICES"] = gpus[i % len(gpus)]
        commands.append(WorkerCommand(argv, env))
    return commands


def run_workers(commands: list[WorkerCommand]) -> int:
    """Start the workers, pass SIGTERM/SIGINT on (each finishes its running evaluation: RQ's warm
    shutdown), wait for all; the worst exit status."""
    procs = [subprocess.Popen(c.argv, env=c.env) for c in commands]

    def pass_on(signum: int, _frame: Any) -> None:
        for proc in procs:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signum)

    previous = {sig: signal.signal(sig, pass_on) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        codes = [proc.wait() for proc in procs]
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return max((abs(code) for code in codes), default=0)
