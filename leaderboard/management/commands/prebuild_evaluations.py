"""Compile the kernels of the next queued evaluations ahead of the GPU (each GPU evalworker runs one
as its child); see leaderboard/evaluations/prebuild.py."""

from __future__ import annotations

import signal
import threading

from django.conf import settings
from django.core.management.base import BaseCommand

from evaluation import EvaluationConfig
from evaluation.builds.stage import BuildPool
from evaluation.sandbox.limits import host_gpu_count
from leaderboard.evaluations.cores import builder_cpus
from leaderboard.evaluations.prebuild import run_builder


class Command(BaseCommand):
    help = "Build the kernels of the next queued evaluations into this host's build cache, until SIGTERM."

    def add_arguments(self, parser):
        parser.add_argument("--queue", action="append", dest="queues", required=True, metavar="NAME")
        parser.add_argument(
            "--workers",
            type=int,
            default=None,
            help="build processes (default: EVAL_BUILD_WORKERS, else sized from measured builds)",
        )
        parser.add_argument(
            "--host-wide",
            action="store_true",
            help="this host's only builder (else one per GPU worker: each gets its part)",
        )
        parser.add_argument("--depth", type=int, default=None, help="queued evaluations to look at (EVAL_BUILD_AHEAD)")
        parser.add_argument("--interval", type=float, default=2.0, help="seconds between looks at the queues")

    def handle(self, *args, **options):
        workers = options["workers"] or settings.EVAL_BUILD_WORKERS  # None: sized from measured builds
        # Off the GPU workers' timing cores and their SMT siblings (leaderboard.evaluations.cores); one
        # builder per GPU worker (not --host-wide) gets its part of those cores and of the memory.
        cpus = builder_cpus()
        share = 1 if options["host_wide"] else max(1, host_gpu_count())
        depth = options["depth"] or settings.EVAL_BUILD_AHEAD
        stop = threading.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: stop.set())
        pool = BuildPool(workers, EvaluationConfig(device="cuda"), cpus, share=share)
        self.stdout.write(
            f"prebuild: {pool.sizer.describe()} on cpus {cpus or 'all'}, {depth} evaluations "
            f"ahead on {', '.join(options['queues'])}"
        )
        try:
            run_builder(pool, options["queues"], depth, options["interval"], lambda: not stop.is_set())
        finally:
            pool.close(wait=False)
