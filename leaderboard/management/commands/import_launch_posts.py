from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from leaderboard.launch_posts import RowErrors, read_csv, store_rows
from problems.importing import read_text_file


class Command(BaseCommand):
    help = (
        "Import launch posts from a CSV with the columns date, lab, model, title, url, lists_kernelbench, "
        "kernelbench_score. Posts are known by url: a second import changes nothing."
    )

    def add_arguments(self, parser):
        parser.add_argument("file", type=Path)

    def handle(self, file: Path, **options):
        text = read_text_file(file)
        try:
            rows = read_csv(text, name=str(file))
        except RowErrors as exc:
            raise CommandError("nothing imported:\n  " + "\n  ".join(exc.errors)) from None
        self.stdout.write(f"Importing {len(rows)} launch posts from {file}")
        report = store_rows(rows)
        self.stdout.write(self.style.SUCCESS(report.summary("launch posts")))
