from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from leaderboard.ingest.results_exchange import MalformedResults, import_records, read_jsonl
from leaderboard.management.authors import command_author


class Command(BaseCommand):
    help = (
        "Store the evaluations of a results file (export_results) on the kernels they belong to: same source hash, "
        "same problem (set, level, number, text), a run on that hardware. Never creates a kernel; skips what is "
        "already stored (idempotent). --missing-ok: a file that is not there is not an error."
    )

    def add_arguments(self, parser):
        parser.add_argument("path", type=Path)
        parser.add_argument("--missing-ok", action="store_true", help="Say so and stop when the file does not exist.")

    def handle(self, path: Path, missing_ok: bool, **options):
        if not path.is_file():
            if missing_ok:
                self.stdout.write(f"no results file at {path}: nothing imported")
                return
            raise CommandError(f"no file {path}")
        try:
            with open(path, encoding="utf-8") as handle:
                records = read_jsonl(handle)
            result = import_records(records, by=command_author(self))
        except MalformedResults as exc:
            raise CommandError(f"{path}: nothing imported: {exc}") from None
        self.stdout.write(self.style.SUCCESS(f"{path}: {len(records)} record(s): {result.summary()}"))
