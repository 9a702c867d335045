import re
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from leaderboard.ingest.archives import Bundle
from leaderboard.ingest.generation_config import CONFIG_NAME, with_defaults
from leaderboard.ingest.run_import import (
    RunSpec,
    choose_problem_set,
    read_folder,
    read_json_upload,
    read_zip,
    store_run,
    verify_run,
)
from leaderboard.ingest.uploads import RowErrors
from leaderboard.management.authors import command_author
from leaderboard.models import Precision
from problems.models import Hardware, ProblemSet


class Command(BaseCommand):
    help = (
        "Import a KernelBench run: a run folder (level_<L>_problem_<P>_sample_<S>_kernel.py files and an optional "
        'eval_results.json), a zip of one, or a JSON file {"kernels": {...}, "eval_results": {...}}. Results are '
        "stored as 'imported, unverified'; --verify also queues every kernel for evaluation here. Idempotent."
    )

    def add_arguments(self, parser):
        parser.add_argument("path", type=Path, help="Run folder, .zip or .json.")
        parser.add_argument(
            "--model", help="Model name (matched case-insensitively, or created); default: generation_config.yaml's."
        )
        parser.add_argument("--organization", default="", help="The model's lab, if the model is new.")
        parser.add_argument(
            "--hardware", required=True, help="Hardware slug or name, e.g. h200 or H100_Modal (case-insensitive)."
        )
        parser.add_argument(
            "--set",
            dest="problem_set",
            help="Problem set slug or name (case-insensitive); default: the only set holding every problem named.",
        )
        parser.add_argument("--setting", help="Default: generation_config.yaml's prompt_option, else one-shot.")
        parser.add_argument(
            "--name", help="Run label (default: generation_config.yaml's run_name, else the file name)."
        )
        parser.add_argument(
            "--level", type=int, choices=[1, 2, 3, 4], help="Level of bare problem ids in eval_results."
        )
        parser.add_argument(
            "--precision", choices=Precision.values, help="Default: generation_config.yaml's, else fp32."
        )
        parser.add_argument("--verify", action="store_true", help="Queue every kernel for evaluation here too.")

    def handle(self, path: Path, **options):
        hardware = Hardware.objects.resolve(options["hardware"])
        if hardware is None:
            raise CommandError(
                f"--hardware: no hardware {options['hardware']!r}; the hardware: {Hardware.objects.listing()}"
            )
        try:
            bundle = self._read(path)
            problem_set = choose_problem_set(options["problem_set"], bundle.kernels)
            self.stdout.write(f"Importing {len(bundle.kernels)} kernels from {path}")
            if bundle.config:
                self.stdout.write(f"  {CONFIG_NAME}: " + ", ".join(f"{k} {v}" for k, v in bundle.config.items()))
            result = store_run(
                self._spec(path, bundle, hardware, problem_set, options),
                bundle,
                by=command_author(self),
                write=self.stdout.write,
            )
        except FileNotFoundError:
            raise CommandError(f"{path}: no such file") from None
        except RowErrors as exc:
            errors = [re.sub(r"^problem_set: ", "--set: ", error) for error in exc.errors]  # this command's flag
            raise CommandError("nothing imported:\n  " + "\n  ".join(errors)) from None
        for warning in result.warnings:
            self.stdout.write(self.style.WARNING(f"  {warning}"))
        self.stdout.write(self.style.SUCCESS(f"run {result.run.pk}: " + result.kernels.summary("kernels")))
        self.stdout.write(self.style.SUCCESS(result.evaluations.summary("imported evaluations")))
        if options["verify"]:
            queued, skipped = verify_run(result.run, by=command_author(self))
            self.stdout.write(f"queued {len(queued)} evaluations on {hardware.slug} ({skipped} already waiting)")

    def _read(self, path: Path) -> Bundle:
        if path.is_dir():
            return read_folder(path)
        if path.suffix == ".zip":
            with path.open("rb") as file:
                return read_zip(file)
        if path.suffix == ".json":
            return read_json_upload(path.read_bytes())[1]
        raise CommandError(f"{path}: not a folder, .zip or .json")

    def _spec(self, path: Path, bundle: Bundle, hardware: Hardware, problem_set: ProblemSet, options) -> RunSpec:
        """The run's description: the flags, over generation_config.yaml's values, over the defaults."""
        given = {key: options[key] for key in ("model", "setting", "name", "level", "precision")}
        fields = with_defaults(given, bundle.config)
        if not fields.get("model"):
            raise CommandError(f"give --model: {path} has no {CONFIG_NAME} with a model_name")
        return RunSpec(
            model=fields["model"],
            organization=options["organization"],
            hardware=hardware,
            problem_set=problem_set,
            setting=fields.get("setting", "one-shot"),
            name=fields.get("name") or path.stem,
            level=fields.get("level"),
            precision=fields.get("precision", Precision.FP32),
            samples=fields.get("samples"),
        )
