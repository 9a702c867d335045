from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from leaderboard.reported_scores import RowErrors, read_csv, store_rows
from problems.importing import read_text_file


class Command(BaseCommand):
    help = "Import reported scores from a CSV with the columns of data/reported_scores.csv."

    def add_arguments(self, parser):
        parser.add_argument("file", type=Path)

    def handle(self, file: Path, **options):
        text = read_text_file(file)
        try:
            rows = read_csv(text, name=str(file))
        except RowErrors as exc:
            raise CommandError("nothing imported:\n  " + "\n  ".join(exc.errors)) from None
        self.stdout.write(f"Importing {len(rows)} reported scores from {file}")
        report = store_rows(rows)
        self.stdout.write(self.style.SUCCESS(report.summary("reported scores")))
