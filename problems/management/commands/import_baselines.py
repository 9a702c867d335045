from pathlib import Path

from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from problems.baselines import compile_variant_from_name, read_baseline_file
from problems.importing import ImportReport, find_or_create, upsert, with_progress
from problems.kernelbench_files import MalformedInput
from problems.management.commands.import_problems import DEFAULT_SET
from problems.models import Baseline, Hardware, Problem, ProblemSet, hardware_slug


class Command(BaseCommand):
    help = "Import a KernelBench baseline timing file (times in ms) for one hardware."

    def add_arguments(self, parser):
        parser.add_argument("file", type=Path)
        parser.add_argument(
            "--hardware",
            required=True,
            help="Hardware slug or name, e.g. h100 or H100_Modal (case-insensitive; created if new).",
        )
        parser.add_argument("--mode", choices=["eager", "compile"], help="Default: compile if the file name says so.")
        parser.add_argument(
            "--set",
            dest="set_name",
            default=DEFAULT_SET,
            help=f"Problem set slug or name, case-insensitive (default: {DEFAULT_SET!r}).",
        )

    def handle(self, file: Path, hardware: str, mode: str | None, set_name: str, **options):
        if not file.is_file():
            raise CommandError(f"{file}: no such file")
        try:
            entries = read_baseline_file(file)
        except MalformedInput as exc:
            raise CommandError(str(exc)) from None
        problem_set = ProblemSet.objects.resolve(set_name)
        if problem_set is None:
            raise CommandError(
                f"no problem set {set_name!r} (the sets: {ProblemSet.objects.listing()}): run import_problems first"
            )
        variant = compile_variant_from_name(file)
        mode = mode or ("compile" if variant else "eager")
        if mode == "eager":
            variant = ""
        self.stdout.write(f"Importing {len(entries)} {mode} baselines from {file} for hardware {hardware!r}")
        report = self._import(entries, problem_set, hardware, mode, variant, str(file))
        for warning in report.warnings:
            self.stderr.write(warning)
        self.stdout.write(self.style.SUCCESS(report.summary("baselines")))

    @transaction.atomic
    def _import(self, entries, problem_set, hardware_name, mode, variant, source_file) -> ImportReport:
        device_name = next((e.device_name for e in entries if e.device_name), "")
        slug = hardware_slug(hardware_name)
        hardware, _ = find_or_create(  # a concurrent import naming the same new hardware finds its row
            lambda: Hardware.objects.resolve(hardware_name),
            lambda: Hardware.objects.create(slug=slug, name=device_name or slug, device_name=device_name),
        )
        problems = {(p.level, p.number): p for p in Problem.objects.filter(problem_set=problem_set)}
        report = ImportReport()
        for entry in with_progress(entries, len(entries), self.stdout.write, "baselines"):
            problem = problems.get((entry.level, entry.number))
            if problem is None:
                report.warnings.append(f"unknown problem (not imported): level{entry.level}/{entry.file_name}")
                continue
            _, outcome = upsert(
                Baseline,
                {"problem": problem, "hardware": hardware, "mode": mode, "compile_variant": variant},
                {
                    "mean_ms": entry.mean_ms,
                    "std_ms": entry.std_ms,
                    "min_ms": entry.min_ms,
                    "max_ms": entry.max_ms,
                    "num_trials": entry.num_trials,
                    "device_name": entry.device_name,
                    "origin": Baseline.Origin.IMPORTED,
                    "source_file": source_file,
                },
            )
            report.add(outcome)
        return report
