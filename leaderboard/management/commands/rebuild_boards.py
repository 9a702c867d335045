"""Re-score every run into the boards' read model; with --verify, check stored against fresh.

The read model (leaderboard/reads/board/store.py) is kept current by the writes that change it;
this command rebuilds it from scratch (after a restore, a migration, or to be sure) and, with
--verify, compares every stored row with a fresh computation and fails if one differs."""

from __future__ import annotations

import time

from django.core.management.base import BaseCommand, CommandError

from leaderboard.reads.board import store as board_store


class Command(BaseCommand):
    help = "Rebuild the leaderboards' stored aggregates from kernels, evaluations and reviews."

    def add_arguments(self, parser):
        parser.add_argument("--verify", action="store_true", help="compare stored rows with a fresh computation")
        parser.add_argument("--verify-only", action="store_true", help="only compare; rebuild nothing")

    def handle(self, *args, **options):
        started = time.monotonic()
        if not options["verify_only"]:
            n = board_store.rebuild_all(write=self.stdout.write)
            self.stdout.write(f"rebuilt the boards of {n} runs in {time.monotonic() - started:.1f} s")
        if options["verify"] or options["verify_only"]:
            differences = board_store.verify_all(write=self.stdout.write)
            for line in differences[:50]:
                self.stderr.write(line)
            if differences:
                raise CommandError(f"{len(differences)} stored rows differ from a fresh computation")
            self.stdout.write(self.style.SUCCESS("stored boards match a fresh computation"))
