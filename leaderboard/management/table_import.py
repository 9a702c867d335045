"""The shape every tabular import command shares: read a UTF-8 file, validate every row, then
write all rows in one transaction or none, and say what changed."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from leaderboard.ingest.uploads import RowErrors, decode_upload
from leaderboard.management.authors import command_author
from problems.importing import ImportReport, read_input_file


class TableImportCommand(BaseCommand):
    noun = "rows"  # plural, for the messages

    def read_rows(self, text: str, name: str) -> list:
        raise NotImplementedError

    store_rows: Callable[..., ImportReport]  # (rows, *, by)

    def add_arguments(self, parser):
        parser.add_argument("file", type=Path)

    def handle(self, file: Path, **options):
        data = read_input_file(file)
        try:
            rows = self.read_rows(decode_upload(data, str(file)), str(file))
        except RowErrors as exc:
            raise CommandError("nothing imported:\n  " + "\n  ".join(exc.errors)) from None
        self.stdout.write(f"Importing {len(rows)} {self.noun} from {file}")
        report = self.store_rows(rows, by=command_author(self))
        self.stdout.write(self.style.SUCCESS(report.summary(self.noun)))
