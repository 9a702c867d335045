import argparse
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from leaderboard.evaluations.queue import EvaluationRefused
from leaderboard.ingest.field_figures import read_figures
from leaderboard.ingest.kernelbench_leaderboard import (
    LEADERBOARD_SET_SLUG,
    PUBLISHED_HARDWARE,
    LeaderboardImport,
    read_leaderboard,
    store_leaderboard,
    verify_field,
)
from leaderboard.ingest.uploads import RowErrors
from leaderboard.management.authors import command_author
from problems.kernelbench_files import MalformedInput
from problems.management.commands.import_problems import DEFAULT_SET
from problems.models import LEVELS, Hardware, ProblemSet


def level_and_number(text: str) -> tuple[int, int]:
    """A problem named as LEVEL/NUMBER (1/50)."""
    level, _, number = text.partition("/")
    if not (level.isdigit() and number.isdigit()) or int(level) not in LEVELS:
        raise argparse.ArgumentTypeError(f"{text!r} is not LEVEL/NUMBER with a level of {sorted(LEVELS)} (e.g. 1/50)")
    return int(level), int(number)


class Command(BaseCommand):
    help = (
        "Import KernelBench's original public leaderboard from a checkout of "
        "https://github.com/anneouyang/KernelBenchLeaderboard (every kernel of raw_data.json, with its code) or from "
        "the figures-only file made from one (export_field_figures: no code): its problem texts as their own problem "
        "set, one imported run per model, and each kernel's published figures on the GPU they were timed on "
        f"({PUBLISHED_HARDWARE}), marking the ones data.json ranks. Idempotent. --verify queues kernels for "
        "evaluation here (--levels, --limit: part of the field, continuing where the last call stopped)."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "path", type=Path, help="The leaderboard's checkout (or its docs/assets folder), or a figures file (.json)."
        )
        parser.add_argument(
            "--hardware",
            default="h200",
            help="Slug or name of the hardware that measures these runs here (default h200); the published figures "
            f"stay on the {PUBLISHED_HARDWARE} hardware record.",
        )
        parser.add_argument(
            "--commit", default="main", help="The checkout's commit, for links to its files (default: main)."
        )
        parser.add_argument(
            "--compare-with",
            default=DEFAULT_SET,
            help="A set imported from KernelBench (slug or name) whose problem texts the leaderboard's are compared "
            f"with (default: {DEFAULT_SET!r}, when it exists).",
        )
        parser.add_argument("--verify", action="store_true", help="Queue kernels for evaluation on --hardware too.")
        parser.add_argument("--levels", type=int, nargs="+", choices=LEVELS, help="With --verify: only these levels.")
        parser.add_argument(
            "--limit", type=int, help="With --verify: at most this many kernels (those not yet measured first)."
        )
        parser.add_argument(
            "--problems",
            type=level_and_number,
            nargs="+",
            metavar="LEVEL/NUMBER",
            help="With --verify: only these problems' kernels (e.g. 1/50 2/14; with --levels, those of its levels).",
        )

    def handle(self, path: Path, hardware: str, commit: str, compare_with: str, verify: bool, **options):
        found = Hardware.objects.resolve(hardware)
        if found is None:
            raise CommandError(f"no hardware {hardware!r} (create it, e.g. in the admin, or run seed_demo)")
        other = ProblemSet.objects.exclude(slug=LEADERBOARD_SET_SLUG).resolve(compare_with)
        if other is None and compare_with != DEFAULT_SET:
            raise CommandError(f"no problem set {compare_with!r}; the sets: {ProblemSet.objects.listing()}")
        try:
            board = read_figures(path) if path.is_file() else read_leaderboard(path, commit)
            self.stdout.write(
                f"Importing {len(board.kernels)} kernels of {len(board.models)} models over {len(board.problems)} "
                f"problems from {path}" + ("" if any(k.source for k in board.kernels) else " (figures only, no code)")
            )
            result = store_leaderboard(board, found, other, self.stdout.write, by=command_author(self))
        except MalformedInput as exc:
            raise CommandError(f"nothing imported: {exc}") from None
        except RowErrors as exc:
            raise CommandError("nothing imported:\n  " + "\n  ".join(exc.errors)) from None
        self._report(result)
        if verify:
            self._verify(result, found, options["levels"], options["limit"], options["problems"])

    def _verify(self, result: LeaderboardImport, hardware: Hardware, levels, limit, problems) -> None:
        try:
            requested, left = verify_field(
                result.problem_set, hardware, levels, limit, by=command_author(self), problems=problems
            )
        except EvaluationRefused as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(
            f"verify: queued {len(requested.queued)} on {hardware.slug}; {left} more not yet measured there"
        )

    def _report(self, result: LeaderboardImport) -> None:
        problem_set, comparison = result.problem_set, result.comparison
        self.stdout.write(
            f"problem set {problem_set.name!r} ({problem_set.slug}): " + result.problems.summary("problems")
        )
        for run_import in result.runs:
            name = run_import.run.model.name
            levels = ", ".join(f"L{level} {n}" for level, n in sorted(result.counts[name].items()))
            self.stdout.write(f"run {run_import.run.pk} {name}: {levels}; " + run_import.kernels.summary("kernels"))
            for warning in run_import.warnings:
                self.stdout.write(self.style.WARNING(f"  {warning}"))
        self.stdout.write(
            f"kernels whose published figures ({PUBLISHED_HARDWARE}) were written or changed: {result.published}"
        )
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
