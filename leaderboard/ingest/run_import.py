"""Importing a whole KernelBench run: a run folder, a zip of one, or the same as JSON.

A run folder holds one file per generated kernel, `level_<L>_problem_<P>_sample_<S>_kernel.py`, and
optionally `eval_results.json`, shaped

    {"<problem id>": [{"sample_id": 0, "compiled": true, "correctness": true, "metadata": {...},
                       "runtime": 1.23, "runtime_stats": {"mean": ..., "std": ..., ...}}]}

with runtimes in milliseconds (a single object instead of the list means sample 0). Problem ids
are the problem numbers within the level; where the kernels span several levels, give `level` or
key the results `level_<L>_problem_<P>`.

Imported results become Evaluations with origin "imported" (shown as "imported, unverified"),
state done. Their kernel time is the reported runtime; their speedup is the problem's eager
Baseline on the run's hardware divided by it, when such a baseline exists, and unknown (None)
otherwise: such kernels count as correct-but-unscored on the leaderboard until verified.
`verify_run` queues every kernel of a run for evaluation here, through request_evaluation.

Everything is validated before anything is written; one transaction writes it all; importing the
same run twice changes nothing.
"""

from __future__ import annotations

import json
import math
import os
import re
import stat
import zipfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from leaderboard.evaluations.queue import request_evaluation
from leaderboard.ingest.reported_scores import match_lab, match_model
from leaderboard.models import Evaluation, Kernel, Origin, Run, guess_backend
from problems.importing import CREATED, ImportReport, upsert
from problems.models import Baseline, Hardware, Problem, ProblemSet

KERNEL_NAME = re.compile(r"^level_(\d+)_problem_(\d+)_sample_(\d+)_kernel\.py$")
RESULTS_NAME = "eval_results.json"
LEVEL_PROBLEM_KEY = re.compile(r"^level_(\d+)_problem_(\d+)$")


def _setting(name: str, default: int) -> int:
    return int(getattr(settings, name, default))


@dataclass(frozen=True)
class Limits:
    """Caps on what one upload may hold; defaults come from settings, with these fallbacks."""

    kernel_bytes: int
    results_bytes: int
    total_bytes: int
    entries: int
    ratio: int

    @classmethod
    def from_settings(cls) -> Limits:
        return cls(
            kernel_bytes=settings.KERNEL_SOURCE_MAX_BYTES,
            results_bytes=_setting("RUN_RESULTS_MAX_BYTES", 20_000_000),
            total_bytes=_setting("RUN_UNCOMPRESSED_MAX_BYTES", 200_000_000),
            entries=_setting("RUN_MAX_ENTRIES", 20_000),
            ratio=_setting("RUN_MAX_COMPRESSION_RATIO", 200),
        )


class BundleError(Exception):
    """Everything wrong with an upload; nothing was written."""

    def __init__(self, errors: list[str]):
        super().__init__("; ".join(errors))
        self.errors = errors


@dataclass(frozen=True)
class KernelFile:
    name: str
    level: int
    problem: int
    sample: int
    source: str


@dataclass
class Bundle:
    """What an upload holds, before it is checked against the database."""

    kernels: list[KernelFile]
    results: Any = None  # the parsed eval_results.json, if any
    ignored: list[str] = field(default_factory=list)


# ---------------------------------------------------------------------------------------------
# Reading: zip, folder, or a {file name: source} mapping


def _decode(name: str, data: bytes) -> str:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BundleError([f"{name}: byte {exc.start} is not UTF-8"]) from None
    return text.removeprefix("\ufeff")


def _check_source(name: str, source: str, limits: Limits) -> None:
    size = len(source.encode("utf-8", errors="surrogatepass"))
    if size > limits.kernel_bytes:
        raise BundleError([f"{name}: {size} bytes; the limit for one kernel is {limits.kernel_bytes} bytes"])
    if "\x00" in source:
        raise BundleError([f"{name}: contains a NUL character"])
    try:
        source.encode("utf-8")
    except UnicodeEncodeError:
        raise BundleError([f"{name}: is not valid Unicode text"]) from None


def _load_results(name: str, text: str) -> Any:
    def no_duplicates(pairs):
        keys = [key for key, _ in pairs]
        duplicated = sorted({key for key in keys if keys.count(key) > 1})
        if duplicated:
            raise ValueError(f"duplicate key(s) {', '.join(duplicated)}")
        return dict(pairs)

    def no_constants(token):
        raise ValueError(f"{token} is not allowed")

    try:
        return json.loads(text, object_pairs_hook=no_duplicates, parse_constant=no_constants)
    except (ValueError, RecursionError) as exc:
        raise BundleError([f"{name}: not valid JSON ({exc})"]) from None


def from_files(files: dict[str, str], results: Any = None, limits: Limits | None = None) -> Bundle:
    """A bundle from kernel file names and sources (the JSON form of a run)."""
    limits = limits or Limits.from_settings()
    if len(files) > limits.entries:
        raise BundleError([f"{len(files)} kernels; the limit is {limits.entries}"])
    kernels: list[KernelFile] = []
    errors: list[str] = []
    ignored: list[str] = []
    for name, source in files.items():
        match = KERNEL_NAME.match(name)
        if not match:
            errors.append(f"{name!r}: not a kernel file name (level_<L>_problem_<P>_sample_<S>_kernel.py)")
            continue
        if not isinstance(source, str):
            errors.append(f"{name}: the source must be text")
            continue
        try:
            _check_source(name, source, limits)
        except BundleError as exc:
            errors += exc.errors
            continue
        level, problem, sample = (int(group) for group in match.groups())
        kernels.append(KernelFile(name, level, problem, sample, source))
    if errors:
        raise BundleError(errors)
    return Bundle(kernels, results, ignored)


def _unsafe_path(name: str) -> str | None:
    normalized = name.replace("\\", "/")
    if "\x00" in name:
        return "contains a NUL character"
    if normalized.startswith("/") or re.match(r"^[A-Za-z]:", normalized):
        return "is an absolute path"
    if ".." in normalized.split("/"):
        return "climbs out of the archive (..)"
    return None


def read_zip(fileobj: IO[bytes], limits: Limits | None = None) -> Bundle:
    """A bundle from a zip of a run folder. Refuses unsafe names, links, encrypted entries, too
    many entries, and anything that inflates past the caps (checked while reading, whatever the
    archive claims)."""
    limits = limits or Limits.from_settings()
    try:
        archive = zipfile.ZipFile(fileobj)
        infos = archive.infolist()
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, ValueError, EOFError):
        raise BundleError(["the file is not a readable zip archive"]) from None
    if len(infos) > limits.entries:
        raise BundleError([f"the archive has {len(infos)} entries; the limit is {limits.entries}"])
    declared = sum(info.file_size for info in infos)
    if declared > limits.total_bytes:
        raise BundleError([f"the archive inflates to {declared} bytes; the limit is {limits.total_bytes}"])
    errors: list[str] = []
    wanted: list[zipfile.ZipInfo] = []
    ignored: list[str] = []
    seen: dict[str, str] = {}
    for info in infos:
        unsafe = _unsafe_path(info.filename)
        if unsafe:
            errors.append(f"{info.filename!r}: {unsafe}")
            continue
        if info.is_dir():
            continue
        if stat.S_ISLNK(info.external_attr >> 16):
            errors.append(f"{info.filename}: is a symbolic link")
            continue
        if info.flag_bits & 0x1:
            errors.append(f"{info.filename}: is encrypted")
            continue
        if info.file_size > 1_000_000 and info.file_size > limits.ratio * max(info.compress_size, 1):
            errors.append(f"{info.filename}: compression ratio above {limits.ratio}:1 (a zip bomb?)")
            continue
        base = info.filename.replace("\\", "/").rsplit("/", 1)[-1]
        if base.startswith("._") or "__MACOSX/" in info.filename:
            continue  # macOS resource forks
        if not (KERNEL_NAME.match(base) or base == RESULTS_NAME):
            ignored.append(info.filename)
            continue
        if base in seen:
            errors.append(f"{info.filename}: a second file named {base} (first: {seen[base]})")
            continue
        seen[base] = info.filename
        wanted.append(info)
    if errors:
        raise BundleError(errors)

    files: dict[str, str] = {}
    results_text: str | None = None
    total = 0
    for info in wanted:
        base = info.filename.replace("\\", "/").rsplit("/", 1)[-1]
        cap = limits.results_bytes if base == RESULTS_NAME else limits.kernel_bytes
        try:
            with archive.open(info) as member:
                data = member.read(cap + 1)
        except (
            zipfile.BadZipFile,
            NotImplementedError,
            RuntimeError,
            OSError,
            EOFError,
            zlib.error,
            ValueError,
        ) as exc:
            errors.append(f"{info.filename}: cannot be read ({exc})")
            continue
        if len(data) > cap:
            errors.append(f"{info.filename}: larger than {cap} bytes")
            continue
        total += len(data)
        if total > limits.total_bytes:
            raise BundleError([f"the archive inflates past {limits.total_bytes} bytes"])
        try:
            text = _decode(info.filename, data)
        except BundleError as exc:
            errors += exc.errors
            continue
        if base == RESULTS_NAME:
            results_text = text
        else:
            files[base] = text
    return _bundle(files, results_text, ignored, errors, limits)


def _bundle(files: dict[str, str], results_text: str | None, ignored: list[str], errors: list[str], limits: Limits) -> Bundle:
    """The bundle read from an archive or a folder, once every entry has been checked."""
    if errors:
        raise BundleError(errors)
    results = _load_results(RESULTS_NAME, results_text) if results_text is not None else None
    bundle = from_files(files, results, limits)
    bundle.ignored = ignored
    return bundle


def read_folder(path: Path, limits: Limits | None = None) -> Bundle:
    """A bundle from a run folder on disk (links are not followed)."""
    limits = limits or Limits.from_settings()
    if not path.is_dir():
        raise BundleError([f"{path}: not a folder"])
    files: dict[str, str] = {}
    results_text = None
    ignored: list[str] = []
    errors: list[str] = []
    count = 0
    for root, _dirs, names in os.walk(path, followlinks=False):
        for base in sorted(names):
            count += 1
            if count > limits.entries:
                raise BundleError([f"{path}: more than {limits.entries} files"])
            file = Path(root) / base
            if not (KERNEL_NAME.match(base) or base == RESULTS_NAME) or file.is_symlink():
                ignored.append(str(file.relative_to(path)))
                continue
            cap = limits.results_bytes if base == RESULTS_NAME else limits.kernel_bytes
            if file.stat().st_size > cap:
                errors.append(f"{file}: larger than {cap} bytes")
                continue
            if base in files or (base == RESULTS_NAME and results_text is not None):
                errors.append(f"{file}: a second file named {base}")
                continue
            try:
                text = _decode(str(file), file.read_bytes())
            except BundleError as exc:
                errors += exc.errors
                continue
            if base == RESULTS_NAME:
                results_text = text
            else:
                files[base] = text
    return _bundle(files, results_text, ignored, errors, limits)


def read_json_upload(data: bytes) -> tuple[dict, Bundle]:
    """A JSON file shaped like the API's JSON body: {"kernels": {...}, "eval_results": {...}, ...}.
    Returns the other fields (model, hardware, ...) and the bundle."""
    document = _load_results("the JSON file", _decode("the JSON file", data))
    if not isinstance(document, dict) or not isinstance(document.get("kernels"), dict):
        raise BundleError(['the JSON file must be an object with "kernels": {file name: source}'])
    kernels = document.pop("kernels")
    results = document.pop("eval_results", None)
    return document, from_files(kernels, results)


# ---------------------------------------------------------------------------------------------
# Checking against the database


@dataclass(frozen=True)
class Result:
    compiled: bool
    correct: bool
    runtime_ms: float | None
    stats: dict
    metadata: dict


def _as_bool(value: Any, where: str) -> bool:
    if isinstance(value, bool):
        return value
    raise ValueError(f"{where} must be true or false, not {value!r}")


def _parse_result(entry: Any, where: str) -> tuple[int, Result]:
    if not isinstance(entry, dict):
        raise ValueError(f"{where}: each result must be an object")
    sample = entry.get("sample_id", 0)
    if isinstance(sample, bool) or not isinstance(sample, int) or sample < 0:
        raise ValueError(f"{where}: sample_id must be a whole number >= 0, not {sample!r}")
    compiled = _as_bool(entry.get("compiled", False), f"{where}: compiled")
    correct = _as_bool(entry.get("correctness", False), f"{where}: correctness")
    runtime = entry.get("runtime")
    if runtime is not None:
        if isinstance(runtime, bool) or not isinstance(runtime, (int, float)) or not math.isfinite(runtime):
            raise ValueError(f"{where}: runtime must be a number of milliseconds, not {runtime!r}")
        if runtime > 1e9:
            raise ValueError(f"{where}: runtime {runtime} ms is not plausible")
    stats = entry.get("runtime_stats") or {}
    metadata = entry.get("metadata") or {}
    if not isinstance(stats, dict) or not isinstance(metadata, dict):
        raise ValueError(f"{where}: runtime_stats and metadata must be objects")
    stats = {
        str(key): value
        for key, value in stats.items()
        if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    }
    if correct and not compiled:
        raise ValueError(f"{where}: correct but not compiled")
    if not _storable(metadata) or not _storable(stats):
        raise ValueError(f"{where}: metadata or runtime_stats hold a NUL character or text that is not valid Unicode")
    runtime_ms = float(runtime) if (runtime is not None and runtime > 0 and correct) else None
    return sample, Result(compiled, correct, runtime_ms, stats, metadata)


def _storable(value: Any) -> bool:
    """Whether a JSON value can be stored in a JSON column everywhere (PostgreSQL refuses NUL
    characters and lone surrogates)."""
    try:
        text = json.dumps(value, ensure_ascii=False)
        text.encode("utf-8")
    except (UnicodeEncodeError, ValueError, RecursionError):
        return False
    return "\x00" not in text and "\\u0000" not in text


def parse_results(results: Any, levels: set[int], level: int | None) -> dict[tuple[int, int, int], Result]:
    """eval_results as {(level, problem number, sample): Result}; raises BundleError."""
    if results is None:
        return {}
    if not isinstance(results, dict):
        raise BundleError([f"{RESULTS_NAME}: must be an object keyed by problem id"])
    parsed: dict[tuple[int, int, int], Result] = {}
    errors: list[str] = []
    for key, entries in results.items():
        match = LEVEL_PROBLEM_KEY.match(str(key))
        if match:
            key_level, number = int(match.group(1)), int(match.group(2))
        elif str(key).isdigit():
            if level is None and len(levels) > 1:
                errors.append(
                    f"{RESULTS_NAME}: key {key!r} is a bare problem id but the kernels span levels "
                    f"{', '.join(map(str, sorted(levels)))}: give level, or use keys level_<L>_problem_<P>"
                )
                continue
            inferred = level if level is not None else (next(iter(levels)) if levels else None)
            if inferred is None:
                errors.append(f"{RESULTS_NAME}: key {key!r}: no kernels to say which level it is; give level")
                continue
            key_level = inferred
            number = int(key)
        else:
            errors.append(f"{RESULTS_NAME}: key {key!r} is not a problem id")
            continue
        for index, entry in enumerate(entries if isinstance(entries, list) else [entries]):
            where = f"{RESULTS_NAME}: problem {key} result {index}"
            try:
                sample, result = _parse_result(entry, where)
            except ValueError as exc:
                errors.append(str(exc))
                continue
            if (key_level, number, sample) in parsed:
                errors.append(f"{where}: a second result for sample {sample}")
                continue
            parsed[(key_level, number, sample)] = result
    if errors:
        raise BundleError(errors)
    return parsed


@dataclass(frozen=True)
class RunSpec:
    model: str
    hardware: Hardware
    problem_set: ProblemSet
    setting: str = "one-shot"
    name: str = ""
    organization: str = ""
    level: int | None = None
    notes: str = ""


@dataclass
class RunImport:
    run: Run
    kernels: ImportReport
    evaluations: ImportReport
    warnings: list[str]


def default_problem_set() -> ProblemSet:
    sets = list(ProblemSet.objects.all()[:2])
    if len(sets) != 1:
        raise BundleError(["give problem_set: " + ("none exists yet" if not sets else "there is more than one")])
    return sets[0]


def _status(result: Result) -> str:
    if result.correct:
        return Evaluation.Status.CORRECT
    if not result.compiled:
        return Evaluation.Status.COMPILE_ERROR
    if any("runtime_error" in str(key) for key in result.metadata):
        return Evaluation.Status.RUNTIME_ERROR
    return Evaluation.Status.INCORRECT


def store_run(spec: RunSpec, bundle: Bundle, user=None, write: Callable[[str], None] | None = None) -> RunImport:
    """Check the bundle against the problem set, then write the run, its kernels and the imported
    evaluations in one transaction. Raises BundleError (writing nothing) when anything is wrong."""
    if not bundle.kernels:
        raise BundleError(["no kernel files (level_<L>_problem_<P>_sample_<S>_kernel.py) in the upload"])
    levels = {kernel.level for kernel in bundle.kernels}
    results = parse_results(bundle.results, levels, spec.level)
    problems = {
        (problem.level, problem.number): problem for problem in Problem.objects.filter(problem_set=spec.problem_set)
    }
    errors: list[str] = []
    seen: dict[tuple[int, int, int], str] = {}
    for kernel in bundle.kernels:
        key = (kernel.level, kernel.problem, kernel.sample)
        if (kernel.level, kernel.problem) not in problems:
            errors.append(
                f"{kernel.name}: problem {kernel.problem} of level {kernel.level} is not in {spec.problem_set.slug}"
            )
        elif key in seen:
            errors.append(f"{kernel.name}: duplicate of {seen[key]}")
        seen[key] = kernel.name
    if errors:
        raise BundleError(errors)
    warnings = [
        f"{RESULTS_NAME}: level {level} problem {number} sample {sample} has no kernel file; skipped"
        for (level, number, sample) in sorted(results)
        if (level, number, sample) not in seen
    ]
    no_result = sum(1 for key in seen if key not in results)
    if bundle.results is not None and no_result:
        warnings.append(f"{no_result} kernel(s) have no result in {RESULTS_NAME}; they can be verified here")
    baselines = {
        baseline.problem_id: baseline.mean_ms
        for baseline in Baseline.objects.filter(
            problem__problem_set=spec.problem_set, hardware=spec.hardware, mode=Baseline.Mode.EAGER, compile_variant=""
        )
    }
    unscored = 0
    kernel_report, evaluation_report = ImportReport(), ImportReport()
    with transaction.atomic():
        model = match_model(spec.model, match_lab(spec.organization))
        run, outcome = upsert(
            Run,
            {
                "model": model,
                "problem_set": spec.problem_set,
                "hardware": spec.hardware,
                "setting": spec.setting,
                "name": spec.name,
                "origin": Origin.IMPORTED,
            },
            {"samples_per_problem": max(kernel.sample for kernel in bundle.kernels) + 1, "notes": spec.notes},
        )
        if outcome == CREATED and user is not None:
            Run.objects.filter(pk=run.pk).update(created_by=user)
        for index, file in enumerate(sorted(bundle.kernels, key=lambda k: (k.level, k.problem, k.sample)), 1):
            if write and len(bundle.kernels) >= 20 and index % max(1, len(bundle.kernels) // 10) == 0:
                write(f"  kernels: {index}/{len(bundle.kernels)}")
            problem = problems[(file.level, file.problem)]
            kernel, outcome = upsert(
                Kernel,
                {"run": run, "problem": problem, "sample_index": file.sample},
                {"source": file.source, "backend": guess_backend(file.source)},
            )
            if outcome == CREATED and user is not None:
                Kernel.objects.filter(pk=kernel.pk).update(submitted_by=user)
            kernel_report.add(outcome)
            result = results.get((file.level, file.problem, file.sample))
            if result is None:
                continue
            reference = baselines.get(problem.pk)
            speedup = reference / result.runtime_ms if (reference and result.runtime_ms) else None
            notes = [{"code": "imported", "metadata": result.metadata}] if result.metadata else []
            if result.correct and speedup is None:
                unscored += 1
                notes.append(
                    {
                        "code": "no_speedup",
                        "text": f"no eager baseline on {spec.hardware.slug} or no runtime: speedup unknown",
                    }
                )
            evaluation, outcome = upsert(
                Evaluation,
                {"kernel": kernel, "hardware": spec.hardware, "origin": Origin.IMPORTED},
                {
                    "state": Evaluation.State.DONE,
                    "status": _status(result),
                    "compiled": result.compiled,
                    "correct": result.correct,
                    "kernel_ms": result.runtime_ms,
                    "reference_ms": reference if speedup else None,
                    "speedup": speedup,
                    "kernel_timing": result.stats,
                    "notes": notes,
                },
            )
            if outcome == CREATED:
                Evaluation.objects.filter(pk=evaluation.pk).update(finished_at=timezone.now())
            evaluation_report.add(outcome)
            if kernel.latest_evaluation_id is None:
                Kernel.objects.filter(pk=kernel.pk).update(latest_evaluation=evaluation)
    if unscored:
        warnings.append(
            f"{unscored} correct kernel(s) have no speedup: no eager baseline for their problem on "
            f"{spec.hardware.slug}; they count as unscored until verified"
        )
    return RunImport(run, kernel_report, evaluation_report, warnings)


@transaction.atomic
def verify_run(run: Run) -> tuple[list[Evaluation], int]:
    """Queue every kernel of `run` for evaluation here on the run's hardware. Kernels that already
    have an evaluation queued or running there are skipped. Returns (queued, skipped count)."""
    busy = set(
        Evaluation.objects.pending().filter(kernel__run=run, hardware=run.hardware).values_list("kernel_id", flat=True)
    )
    queued, skipped = [], 0
    for kernel in run.kernels.order_by("problem__level", "problem__number", "sample_index"):
        if kernel.pk in busy:
            skipped += 1
            continue
        queued.append(request_evaluation(kernel, run.hardware))
    return queued, skipped
