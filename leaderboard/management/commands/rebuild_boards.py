"""Re-score every run into the boards' read model; with --verify, check stored against fresh.

The read model (leaderboard/boards/) is kept current by the writes that change it;
this command rebuilds it from scratch (after a restore, a migration, or to be sure: by sets on
PostgreSQL, leaderboard/boards/rebuild.py) and, with --verify, compares the stored rows with a
fresh computation and fails if one differs: every run's, or with --sample N a sample's (N runs at
random and the N re-scored last), which at millions of kernels takes seconds instead of the time
of a second rebuild. A check first re-scores the runs still marked for re-scoring (a write the
background re-scorer has not taken yet) and says how many there were, so that it compares settled
state: a difference then is a wrong stored row, not a pending one."""

from __future__ import annotations

import time

from django.core.management.base import BaseCommand, CommandError

from leaderboard.boards import rebuild as board_rebuild
from leaderboard.boards import rescoring as board_rescoring
from leaderboard.boards import stored as board_stored


class Command(BaseCommand):
    help = "Rebuild the leaderboards' stored aggregates from kernels, evaluations and reviews."

    def add_arguments(self, parser):
        parser.add_argument("--verify", action="store_true", help="compare stored rows with a fresh computation")
        parser.add_argument(
            "--verify-only", action="store_true", help="only compare (pending marks made up first); rebuild nothing"
        )
        parser.add_argument("--sample", type=int, help="verify N runs at random and the N re-scored last, not all")

    def handle(self, *args, **options):
        started = time.monotonic()
        if not options["verify_only"]:
            n = board_rebuild.rebuild(write=self.stdout.write)
            self.stdout.write(f"rebuilt the boards of {n} runs in {time.monotonic() - started:.1f} s")
        if options["verify"] or options["verify_only"]:
            self.verify(options["sample"])

    def verify(self, sample: int | None) -> None:
        started = time.monotonic()
        waited = board_stored.oldest_mark_seconds()
        pending = board_rescoring.make_up_marks()
        self.stdout.write(
            f"{pending} run{'' if pending == 1 else 's'} marked for re-scoring when the check began: re-scored first"
            + (f" (the oldest mark had waited {waited:.1f} s)" if pending else "")
        )
        if aside := board_stored.set_aside_runs():
            self.stdout.write(f"{len(aside)} runs set aside (they fail to score): their stored rows are kept")
        if sample is None:
            differences = board_rescoring.verify_all(write=self.stdout.write)
            what = "stored boards match"
        else:
            runs = board_rebuild.sample_runs(sample)
            differences = board_rebuild.verify_runs(runs, write=self.stdout.write)
            differences += board_rebuild.verify_problem_counts()
            what = f"stored boards, review state and kernel counts of {len(runs)} sampled runs match"
        for line in differences[:50]:
            self.stderr.write(line)
        if differences:
            raise CommandError(f"{len(differences)} stored rows differ from a fresh computation")
        self.stdout.write(self.style.SUCCESS(f"{what} a fresh computation ({time.monotonic() - started:.1f} s)"))
