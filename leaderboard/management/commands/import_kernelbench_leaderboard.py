from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from leaderboard.ingest.kernelbench_leaderboard import (
    LEADERBOARD_SET_SLUG,
    PUBLISHED_HARDWARE,
    LeaderboardImport,
    read_leaderboard,
    store_leaderboard,
)
from leaderboard.ingest.run_import import verify_run
from leaderboard.ingest.uploads import RowErrors
from problems.kernelbench_files import MalformedInput
from problems.management.commands.import_problems import DEFAULT_SET
from problems.models import Hardware, ProblemSet


class Command(BaseCommand):
    help = (
        "Import KernelBench's original public leaderboard from a checkout of "
        "https://github.com/anneouyang/KernelBenchLeaderboard: its problem texts as their own problem set, one "
        "imported run per model holding the kernels it lists (each problem's best correct one), and each published "
        f"speedup kept apart as 'published, {PUBLISHED_HARDWARE}'. Idempotent."
    )

    def add_arguments(self, parser):
        parser.add_argument("path", type=Path, help="The leaderboard's checkout (or its docs/assets folder).")
        parser.add_argument(
            "--hardware",
            required=True,
            help="Slug or name of the hardware these runs are verified on here, e.g. h200 (the published figures "
            f"stay labelled {PUBLISHED_HARDWARE}).",
        )
        parser.add_argument(
            "--compare-with",
            default=DEFAULT_SET,
            help="A set imported from KernelBench (slug or name) whose problem texts the leaderboard's are compared "
            f"with (default: {DEFAULT_SET!r}, when it exists).",
        )
        parser.add_argument("--verify", action="store_true", help="Queue every kernel for evaluation here too.")

    def handle(self, path: Path, hardware: str, compare_with: str, verify: bool, **options):
        found = Hardware.objects.resolve(hardware)
        if found is None:
            raise CommandError(f"no hardware {hardware!r}")
        other = ProblemSet.objects.exclude(slug=LEADERBOARD_SET_SLUG).resolve(compare_with)
        if other is None and compare_with != DEFAULT_SET:
            raise CommandError(f"no problem set {compare_with!r}; the sets: {ProblemSet.objects.listing()}")
        try:
            board = read_leaderboard(path)
            self.stdout.write(
                f"Importing {len(board.kernels)} kernels of {len(board.models)} models over {len(board.problems)} "
                f"problems from {path}"
            )
            result = store_leaderboard(board, found, other, self.stdout.write)
        except MalformedInput as exc:
            raise CommandError(f"nothing imported: {exc}") from None
        except RowErrors as exc:
            raise CommandError("nothing imported:\n  " + "\n  ".join(exc.errors)) from None
        self._report(result)
        if verify:
            for run_import in result.runs:
                queued, skipped = verify_run(run_import.run)
                self.stdout.write(f"run {run_import.run.pk}: queued {len(queued)} on {found.slug} ({skipped} waiting)")

    def _report(self, result: LeaderboardImport) -> None:
        problem_set, comparison = result.problem_set, result.comparison
        self.stdout.write(f"problem set {problem_set.name!r} ({problem_set.slug}): " + result.problems.summary("problems"))
        for run_import in result.runs:
            self.stdout.write(f"run {run_import.run.pk} {run_import.run.model.name}: " + run_import.kernels.summary("kernels"))
            for warning in run_import.warnings:
                self.stdout.write(self.style.WARNING(f"  {warning}"))
        self.stdout.write(f"published figures ({PUBLISHED_HARDWARE}) written or changed: {result.published}")
        self.stdout.write(f"problems: {comparison.summary}")
        if comparison.not_comparable:
            shown = ", ".join(f"L{level} #{number}" for level, number in comparison.not_comparable[:40])
            more = len(comparison.not_comparable) - 40
            self.stdout.write(f"  not comparable: {shown}" + (f" and {more} more" if more > 0 else ""))
        kernels = sum(run_import.run.kernels.count() for run_import in result.runs)
        self.stdout.write(
            self.style.SUCCESS(
                f"{len(result.runs)} runs, {kernels} kernels, {len(comparison.matched)} problems matched, "
                f"{len(comparison.not_comparable)} not comparable"
            )
        )
