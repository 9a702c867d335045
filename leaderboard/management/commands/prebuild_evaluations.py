"""Compile the kernels of the next queued evaluations ahead of the GPU (each GPU evalworker runs one
as its child); see leaderboard/evaluations/prebuild.py."""

from __future__ import annotations

import signal
import threading

from django.conf import settings
from django.core.management.base import BaseCommand

from evaluation import EvaluationConfig
from evaluation.build_stage import BuildPool, default_build_workers
from evaluation.sweep import host_gpu_count
from leaderboard.evaluations.prebuild import run_builder


class Command(BaseCommand):
    help = "Build the kernels of the next queued evaluations into this host's build cache, until SIGTERM."

    def add_arguments(self, parser):
        parser.add_argument("--queue", action="append", dest="queues", required=True, metavar="NAME")
        parser.add_argument("--workers", type=int, default=None, help="build processes (default: EVAL_BUILD_WORKERS)")
        parser.add_argument("--depth", type=int, default=None, help="queued evaluations to look at (EVAL_BUILD_AHEAD)")
        parser.add_argument("--interval", type=float, default=2.0, help="seconds between looks at the queues")

    def handle(self, *args, **options):
        workers = options["workers"] or settings.EVAL_BUILD_WORKERS
        if workers is None:
            # Every GPU worker of the host runs a builder: share the host's build processes among them.
            gpus = max(1, host_gpu_count())
            workers = max(1, default_build_workers(gpus) // gpus)
        depth = options["depth"] or settings.EVAL_BUILD_AHEAD
        stop = threading.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: stop.set())
        self.stdout.write(f"prebuild: {workers} build process(es), {depth} evaluations ahead on "
                          f"{', '.join(options['queues'])}")
        pool = BuildPool(workers, EvaluationConfig(device="cuda"))
        try:
            run_builder(pool, options["queues"], depth, options["interval"], lambda: not stop.is_set())
        finally:
            pool.close(wait=False)
