from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from leaderboard.ingest.field_figures import write_figures
from leaderboard.ingest.kernelbench_leaderboard import read_leaderboard
from problems.kernelbench_files import MalformedInput

DEFAULT_OUT = settings.BASE_DIR / "data" / "field" / "kernelbench_leaderboard_figures.json"


class Command(BaseCommand):
    help = (
        "Write the figures-only file of KernelBench's original leaderboard from a checkout: models, problems, each "
        "kernel's hash, public URL, published figures and ranked flag; no kernel code and no problem text (it can be "
        "committed; seed_demo loads it). Reads files, writes nothing in the database."
    )

    def add_arguments(self, parser):
        parser.add_argument("path", type=Path, help="The leaderboard's checkout (or its docs/assets folder).")
        parser.add_argument(
            "--commit", required=True, help="The checkout's commit (40 hex digits): the links point there."
        )
        parser.add_argument(
            "--out", type=Path, default=DEFAULT_OUT, help=f"Default: {DEFAULT_OUT.relative_to(settings.BASE_DIR)}"
        )

    def handle(self, path: Path, commit: str, out: Path, **options):
        try:
            board = read_leaderboard(path, commit)
        except MalformedInput as exc:
            raise CommandError(f"nothing written: {exc}") from None
        made_by = f"manage.py export_field_figures <checkout of {commit[:12]}> --commit {commit}"
        write_figures(board, out, made_by)
        ranked = sum(kernel.ranked for kernel in board.kernels)
        self.stdout.write(
            self.style.SUCCESS(
                f"wrote {out}: {len(board.problems)} problems, {len(board.kernels)} kernels ({ranked} ranked) "
                f"of {len(board.models)} models, no code"
            )
        )
