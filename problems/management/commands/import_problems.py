from pathlib import Path

from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from problems.importing import ImportReport, upsert, with_progress
from problems.kernelbench_files import MalformedInput, infer_kernelbench_version, scan_checkout
from problems.models import RULES_BY_VERSION, Problem, ProblemSet, ScoringRules, name_slug

DEFAULT_SET = "KernelBench v0.1"


class Command(BaseCommand):
    help = "Import the problems of a KernelBench checkout (or its KernelBench/ folder) into a problem set."

    def add_arguments(self, parser):
        parser.add_argument(
            "path", type=Path, help="A KernelBench checkout, its KernelBench/ folder, or the starter catalogue."
        )
        parser.add_argument(
            "--set",
            dest="set_name",
            default=DEFAULT_SET,
            help=f"Problem set: an existing one's slug or name (case-insensitive), or a new name (default: {DEFAULT_SET!r}).",
        )
        parser.add_argument(
            "--set-version", dest="set_version", default="", help="Version label stored on a new problem set."
        )
        parser.add_argument(
            "--kernelbench-version",
            choices=sorted(RULES_BY_VERSION),
            help="Whose scoring rules the set carries (v0 and v0.1: tolerance 1e-2 for fp32; main: 1e-4). "
            "Default: inferred from the checkout, and said.",
        )

    def handle(self, path: Path, set_name: str, set_version: str, kernelbench_version: str | None = None, **options):
        if not path.exists():
            raise CommandError(f"{path}: no such file or folder")
        try:
            scan = scan_checkout(path)
        except MalformedInput as exc:
            raise CommandError(str(exc)) from None
        for message in scan.skipped:
            self.stderr.write(f"skipped (reported, not imported): {message}")
        if not scan.problems:
            raise CommandError(f"{path}: no importable problem files found")
        self.stdout.write(f"Importing {len(scan.problems)} problems from {path} into {set_name!r}")
        needing = [p for p in scan.problems if "needs-" in p.tags]
        if needing:
            self.stdout.write(
                f"{len(needing)} of them need more than PyTorch (tagged needs-<module> / needs-weights); "
                "they evaluate only on hosts that have it"
            )
        rules = self._rules(path, kernelbench_version)
        problem_set, report = self._import(scan.problems, set_name, set_version, rules, kernelbench_version is not None)
        self.stdout.write(self.style.SUCCESS(report.summary("problems")))
        self.stdout.write(f"problem set {problem_set.name!r}: slug {problem_set.slug} (give either as --set)")

    def _rules(self, path: Path, version: str | None) -> ScoringRules:
        if version is None:
            version, evidence = infer_kernelbench_version(path)
            self.stdout.write(f"KernelBench version {version} ({evidence}); --kernelbench-version chooses another")
        rules = ScoringRules.objects.for_version(version)
        self.stdout.write(f"Scoring rules: {rules.summary}")
        return rules

    @transaction.atomic
    def _import(
        self, problems, set_name: str, version: str, rules: ScoringRules, explicit: bool
    ) -> tuple[ProblemSet, ImportReport]:
        problem_set = ProblemSet.objects.resolve(set_name) or ProblemSet.objects.create(
            name=set_name, slug=name_slug(set_name, ProblemSet.SLUG_LENGTH), version=version, rules=rules
        )
        if problem_set.rules_id != rules.pk:
            self._keep_or_change_rules(problem_set, rules, explicit)
        report = ImportReport()
        for problem in with_progress(problems, len(problems), self.stdout.write, "problems"):
            _, outcome = upsert(
                Problem,
                {"problem_set": problem_set, "level": problem.level, "number": problem.number},
                {"name": problem.name, "source": problem.source, "tags": problem.tags},
            )
            report.add(outcome)
        return problem_set, report

    def _keep_or_change_rules(self, problem_set: ProblemSet, rules: ScoringRules, explicit: bool) -> None:
        """An existing set changes rules only when asked; its runs keep the rules they recorded."""
        if explicit:
            ProblemSet.objects.filter(pk=problem_set.pk).update(rules=rules)
            self.stdout.write(f"{problem_set.name}: rules changed to {rules.name}; runs keep theirs (rescore_run)")
        else:
            self.stdout.write(
                f"{problem_set.name} keeps its rules ({problem_set.rules.name}); pass --kernelbench-version to change"
            )
