"""The boards' background re-scorer (leaderboard/boards/rescorer.py): re-score the runs that
writes marked, in batches, and keep the standard boards built (leaderboard/ops/kept_boards.py),
until SIGTERM; or re-score once (--once), as a cron job or a test would."""

from __future__ import annotations

import signal
import threading

from django.conf import settings
from django.core.management.base import BaseCommand

from leaderboard.boards import rescorer
from leaderboard.ops import kept_boards


class Command(BaseCommand):
    help = "Keep the leaderboards' stored aggregates current: re-score the runs writes marked, in batches."

    def add_arguments(self, parser):
        parser.add_argument("--once", action="store_true", help="re-score what is marked now, then exit")
        parser.add_argument("--poll", type=float, default=rescorer.POLL_SECONDS, help="idle seconds between passes")
        parser.add_argument("--batch", type=int, default=rescorer.BATCH, help="runs re-scored per transaction")
        parser.add_argument(
            "--sweep-seconds", type=float, default=kept_boards.SWEEP_SECONDS,
            help="keep the standard boards built this often (0: never)",
        )  # fmt: skip

    def handle(self, *args, **options):
        verbose = options["verbosity"] >= 2
        if options["once"]:
            while (done := rescorer.rescore_pass(options["batch"])).runs:
                if verbose:
                    self._report(done)
            return
        if not settings.BOARD_RESCORER:
            self.stderr.write(
                "BOARD_RESCORER is off: writers still re-score their runs themselves; set BOARD_RESCORER=1 "
                "for the web, the workers and this process so that they leave it to this one."
            )
        stop = threading.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: stop.set())
        self.stdout.write(f"re-scoring marked runs every {options['poll']:g} s, at most {options['batch']} at a time")
        self.stdout.flush()
        report = self._report if verbose else None
        rescorer.run(
            stop, options["poll"], options["batch"], report, sweep_every=options["sweep_seconds"], sweep=_sweep
        )

    def _report(self, done: rescorer.Pass) -> None:
        """One line per pass (-v 2), read by benchmarks/web/churn_bench.py."""
        self.stdout.write(
            f"pass at {done.started:.3f}: {done.runs} runs in {done.seconds * 1000:.1f} ms, "
            f"database {done.db_seconds * 1000:.1f} ms"
        )
        self.stdout.flush()


def _sweep(start: int, rebuild_stale: bool) -> int:
    return kept_boards.sweep(start, rebuild_stale=rebuild_stale)
