"""Re-enqueue what the database says is pending but Redis lost; retry or fail evaluations whose
worker died. Run once (cron) or with --loop (each evalworker runs one as its child)."""

from __future__ import annotations

import signal
import threading

from django.conf import settings
from django.core.management.base import BaseCommand

from leaderboard.evaluations import host_space
from leaderboard.evaluations.clock import db_now
from leaderboard.evaluations.sweep import dead_worker_bound_s, retry_given_back, run_sweeper, sweep_evaluations
from problems.models import Hardware


class Command(BaseCommand):
    help = "Make Redis agree with the database about pending evaluations."

    def add_arguments(self, parser):
        parser.add_argument("--loop", action="store_true", help="sweep every --interval seconds until SIGTERM")
        parser.add_argument("--interval", type=float, default=None, help="seconds between sweeps (looping)")
        parser.add_argument("--hardware", default="", help="hardware slug whose last_seen_at to refresh each sweep")

    def handle(self, *args, **options):
        if not options["loop"]:
            self.stdout.write(str(sweep_evaluations()))
            return
        interval = options["interval"] or settings.EVAL_SWEEP_INTERVAL_S
        stop = threading.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: stop.set())
        self.stdout.write(
            f"sweeping every {interval:g} s; a dead worker's job is noticed within {dead_worker_bound_s()} s"
        )
        slug = options["hardware"]

        def touch() -> None:
            if slug:  # the sweeper child of a worker: say the worker host is alive, and its free space
                Hardware.objects.filter(slug=slug).update(last_seen_at=db_now())
                host_space.evict_build_cache()
                host_space.reap_sandbox_folders()
                if not host_space.report().refusing:  # a healthy host: retry what a broken one burned
                    retry_given_back(slug)

        run_sweeper(interval, stop, after_each=touch)
