"""Score runs again under another KernelBench rule set, keeping their earlier verdicts."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from leaderboard.ingest.run_import import rescore_run
from leaderboard.management.authors import command_author
from leaderboard.models import Run
from problems.models import ScoringRules


class Command(BaseCommand):
    help = (
        "Re-score runs under another rule set (slug, name, or KernelBench version: v0, v0.1, main): the run "
        "records the rules and every kernel is queued for a new evaluation; earlier evaluations are kept."
    )

    def add_arguments(self, parser):
        parser.add_argument("run_ids", nargs="+", type=int, metavar="RUN_ID")
        parser.add_argument("--rules", required=True, help="rule set: slug, name, or v0 / v0.1 / main")

    def handle(self, *args, run_ids: list[int], rules: str, **options):
        chosen = ScoringRules.objects.resolve(rules)
        if chosen is None:
            known = ", ".join(ScoringRules.objects.values_list("slug", flat=True)) or "none yet"
            raise CommandError(f"no rule set {rules!r}; known: {known} (or v0, v0.1, main)")
        runs = {run.pk: run for run in Run.objects.select_related("hardware", "rules").filter(pk__in=run_ids)}
        missing = sorted(set(run_ids) - set(runs))
        if missing:
            raise CommandError(f"no run with id {', '.join(map(str, missing))}")
        for run_id in run_ids:
            run = runs[run_id]
            before = run.rules.name
            queued, skipped = rescore_run(run, chosen, by=command_author(self))
            self.stdout.write(
                f"run {run_id}: {before} -> {chosen.name}; queued {len(queued)} evaluations"
                + (f", {skipped} kernels skipped (one already waiting)" if skipped else "")
            )
