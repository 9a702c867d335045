import sys
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from leaderboard.ingest.results_exchange import exported, write_jsonl
from leaderboard.models import Evaluation
from problems.models import LEVELS, Hardware, ProblemSet


class Command(BaseCommand):
    help = (
        "Write finished evaluations as JSON lines that travel without code: figures and environment only, each keyed "
        "by its kernel's source hash, problem set, level and number, hardware slug and scoring rules (no kernel code, "
        "no problem text, no logs or error text). import_results stores them back into any instance."
    )

    def add_arguments(self, parser):
        parser.add_argument("--out", type=Path, help="The file to write (default: standard output).")
        parser.add_argument("--hardware", help="Only evaluations on this hardware (slug or name).")
        parser.add_argument("--problem-set", help="Only kernels of this problem set (slug or name).")
        parser.add_argument("--levels", type=int, nargs="+", choices=LEVELS)
        parser.add_argument(
            "--with-imported",
            action="store_true",
            help="Also evaluations imported from elsewhere (default: measured here only).",
        )

    def handle(
        self, out: Path | None, hardware: str | None, problem_set: str | None, levels, with_imported: bool, **options
    ):
        evaluations = Evaluation.objects.all()
        if hardware:
            found = Hardware.objects.resolve(hardware)
            if found is None:
                raise CommandError(f"no hardware {hardware!r}")
            evaluations = evaluations.filter(hardware=found)
        if problem_set:
            chosen = ProblemSet.objects.resolve(problem_set)
            if chosen is None:
                raise CommandError(f"no problem set {problem_set!r}; the sets: {ProblemSet.objects.listing()}")
            evaluations = evaluations.filter(kernel__problem__problem_set=chosen)
        if levels:
            evaluations = evaluations.filter(kernel__problem__level__in=levels)
        if not with_imported:
            evaluations = evaluations.filter(origin="measured")
        if out is None:
            count = write_jsonl(exported(evaluations), sys.stdout)
            self.stderr.write(f"{count} evaluation(s) written")
            return
        out.parent.mkdir(parents=True, exist_ok=True)
        partial = out.with_name(out.name + ".partial")
        with open(partial, "w", encoding="utf-8") as handle:
            count = write_jsonl(exported(evaluations), handle)
        partial.replace(out)  # a reader never sees half a file
        self.stdout.write(self.style.SUCCESS(f"wrote {count} evaluation(s) to {out}"))
