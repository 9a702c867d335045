"""Importing a whole KernelBench run (read by leaderboard/ingest/archives.py) into the database.

eval_results.json is shaped

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

A stored kernel's source never changes (Kernel refuses it, on save and in bulk). An upload whose
kernel for some (problem, sample) differs from the stored run's is therefore stored as a **new
run**, a revision named "<name> (revision N)", with its own kernels and imported results; the stored
run keeps its kernels, evaluations, verdicts and board place. A result that changes for an unchanged
kernel is a new imported evaluation (the old one stays in the history, and a verdict given before it
no longer covers it); it becomes the kernel's latest only in place of an imported one.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.db.models import Q
from django.template.defaultfilters import pluralize
from django.utils import timezone

from evaluation.results.metrics import MAX_SPEEDUP, MIN_RUNTIME_MS, plausible_speedup
from leaderboard.boards import marks as board_marks
from leaderboard.boards import rescoring as board_rescoring
from leaderboard.evaluations.queue import request_evaluations
from leaderboard.evaluations.quotas import check_source_bytes
from leaderboard.ingest.archives import (
    RESULTS_NAME,
    Bundle,
    KernelFile,
    from_files,
    read_folder,
    read_json_upload,
    read_zip,
)
from leaderboard.ingest.model_names import match_lab, match_model, model_name_problem
from leaderboard.ingest.submissions import MODEL_NEW
from leaderboard.ingest.uploads import RowErrors
from leaderboard.models import (
    WRITE_ANY_RUN,
    Author,
    Evaluation,
    Kernel,
    Origin,
    Precision,
    Run,
    WriteRecord,
    acting_user,
    guess_backend,
    utf8_size,
)
from leaderboard.reviews.services import inherit_exclusions
from problems.importing import CREATED, DIGITS, UNCHANGED, UPDATED, ImportReport, checked_int, whole_number
from problems.models import Baseline, Hardware, Problem, ProblemSet, ScoringRules, source_sha256

# The archive readers are part of this module's interface for its callers (API, command).
__all__ = [
    "RunImport",
    "RunSpec",
    "choose_problem_set",
    "from_files",
    "read_folder",
    "read_json_upload",
    "read_zip",
    "store_run",
    "verify_run",
]

LEVEL_PROBLEM_KEY = re.compile(r"^level_(\d+)_problem_(\d+)$", re.ASCII)
# The name suffix of a run's revision: an upload that changes a stored kernel's source.
REVISION = re.compile(r" \(revision (\d{1,6})\)", re.ASCII)
# KernelBench writes this runtime for a kernel it could not time.
NO_RUNTIME = -1
MAX_RUNTIME_MS = 1e9
# Rows per bulk INSERT/UPDATE (SQLite lowers it further to its 999 parameters per query).
BATCH_SIZE = 500
# What a re-import reads of the run's stored kernels and compares or links.
_KERNEL_READ = ("pk", "run_id", "problem_id", "sample_index", "latest_evaluation_id")
_EVALUATION_VALUES = (
    "state", "status", "compiled", "correct", "kernel_ms", "reference_ms", "speedup", "kernel_timing", "notes",
)  # fmt: skip


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


def _parse_runtime(runtime: Any, correct: bool, where: str) -> float | None:
    """A result's runtime in ms: finite and positive; a kernel that is not correct may also give
    none (null, or KernelBench's -1). ValueError naming the result otherwise."""
    if runtime is None:
        return None
    if isinstance(runtime, bool) or not isinstance(runtime, (int, float)) or not math.isfinite(runtime):
        raise ValueError(f"{where}: runtime must be a number of milliseconds, not {runtime!r}")
    if runtime > MAX_RUNTIME_MS:
        raise ValueError(f"{where}: runtime {runtime} ms is not plausible")
    if runtime <= 0 and (correct or runtime != NO_RUNTIME):
        raise ValueError(f"{where}: runtime {runtime} ms is not positive (only a failed kernel may give {NO_RUNTIME})")
    if 0 < runtime < MIN_RUNTIME_MS:
        raise ValueError(f"{where}: runtime {runtime!r} ms is under the physical floor of {MIN_RUNTIME_MS:g} ms")
    return float(runtime) if runtime > 0 and correct else None


def _parse_stats(stats: dict, where: str) -> dict:
    """The numeric timing statistics (text such as a device name is dropped): each finite and not
    negative, else ValueError naming the key."""
    kept = {}
    for key, value in stats.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        if not math.isfinite(value) or value < 0 or value > MAX_RUNTIME_MS:
            raise ValueError(f"{where}: runtime_stats {str(key)[:40]!r} is {value!r}, not a finite number >= 0")
        kept[str(key)] = value
    return kept


def _parse_result(entry: Any, where: str) -> tuple[int, Result]:
    if not isinstance(entry, dict):
        raise ValueError(f"{where}: each result must be an object")
    try:
        sample = checked_int(entry.get("sample_id", 0), Kernel, "sample_index")
    except ValueError as exc:
        raise ValueError(f"{where}: sample_id {exc}") from None
    compiled = _as_bool(entry.get("compiled", False), f"{where}: compiled")
    correct = _as_bool(entry.get("correctness", False), f"{where}: correctness")
    if correct and not compiled:
        raise ValueError(f"{where}: correct but not compiled")
    runtime_ms = _parse_runtime(entry.get("runtime"), correct, where)
    stats = entry.get("runtime_stats") or {}
    metadata = entry.get("metadata") or {}
    if not isinstance(stats, dict) or not isinstance(metadata, dict):
        raise ValueError(f"{where}: runtime_stats and metadata must be objects")
    stats = _parse_stats(stats, where)
    if not _storable(metadata) or not _storable(stats):
        raise ValueError(f"{where}: metadata or runtime_stats hold a NUL character or text that is not valid Unicode")
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


def _result_key(key: str, levels: set[int], level: int | None) -> tuple[int, int]:
    """(level, problem number) of an eval_results key, each within its column's range;
    ValueError naming the key and what is wrong with it."""
    where = f"{RESULTS_NAME}: key {key[:40]!r}"
    match = LEVEL_PROBLEM_KEY.match(key)
    if match:
        level_text, number_text = match.groups()
    elif DIGITS.fullmatch(key):
        if level is None and len(levels) > 1:
            raise ValueError(
                f"{where} is a bare problem id but the kernels span levels "
                f"{', '.join(map(str, sorted(levels)))}: give level, or use keys level_<L>_problem_<P>"
            )
        level_text = level if level is not None else (next(iter(levels)) if levels else None)
        if level_text is None:
            raise ValueError(f"{where}: no kernels to say which level it is; give level")
        number_text = key
    else:
        raise ValueError(f"{where} is not a problem id (<P> or level_<L>_problem_<P>, digits 0-9)")
    try:
        return whole_number(level_text), checked_int(number_text, Problem, "number")
    except ValueError as exc:
        raise ValueError(f"{where}: {exc}") from None


def parse_results(results: Any, levels: set[int], level: int | None) -> dict[tuple[int, int, int], Result]:
    """eval_results as {(level, problem number, sample): Result}; raises RowErrors."""
    if results is None:
        return {}
    if not isinstance(results, dict):
        raise RowErrors([f"{RESULTS_NAME}: must be an object keyed by problem id"])
    parsed: dict[tuple[int, int, int], Result] = {}
    errors: list[str] = []
    for key, entries in results.items():
        try:
            key_level, number = _result_key(str(key), levels, level)
        except ValueError as exc:
            errors.append(str(exc))
            continue
        for index, entry in enumerate(entries if isinstance(entries, list) else [entries]):
            where = f"{RESULTS_NAME}: problem {str(key)[:40]} result {index}"
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
        raise RowErrors(errors)
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
    precision: str = Precision.FP32
    samples: int | None = None  # samples per problem the run asked for (generation_config.yaml's num_samples)
    aliases: tuple[str, ...] = ()  # other names of the model in the same source (model_names.match_model)
    alias_source: str = ""  # who uses those names


@dataclass
class RunImport:
    run: Run
    kernels: ImportReport
    evaluations: ImportReport
    warnings: list[str]


def choose_problem_set(named: str | None, kernels: list[KernelFile]) -> ProblemSet:
    """The set a run is imported into: the one `named` (slug or name, case-insensitively), else
    the only set there is, else the only set that holds every problem the kernel files name.
    RowErrors listing the candidate sets (with their slugs) otherwise."""
    sets = ProblemSet.objects.all()
    if named:
        problem_set = sets.resolve(named)
        if problem_set is None:
            raise RowErrors([f"problem_set: no problem set {named[:120]!r}; the sets: {sets.listing()}"])
        return problem_set
    every = list(sets[:2])
    if len(every) == 1:
        return every[0]
    if not every:
        raise RowErrors(["problem_set: no problem set exists yet (import_problems first)"])
    holding = sets.holding({(kernel.level, kernel.problem) for kernel in kernels})
    if len(holding) == 1:
        return holding[0]
    candidates = ", ".join(f"{s.slug} ({s.name})" for s in holding) if holding else sets.listing()
    why = "more than one set holds" if holding else "no one set holds"
    raise RowErrors([f"problem_set: name one ({why} every problem of these kernels); the candidates: {candidates}"])


def _status(result: Result) -> str:
    if result.correct:
        return Evaluation.Status.CORRECT
    if not result.compiled:
        return Evaluation.Status.COMPILE_ERROR
    if any("runtime_error" in str(key) for key in result.metadata):
        return Evaluation.Status.RUNTIME_ERROR
    return Evaluation.Status.INCORRECT


Key = tuple[int, int, int]  # (level, problem number, sample)


@dataclass
class _Plan:
    """What store_run writes, once everything has been checked."""

    spec: RunSpec
    kernels: list[KernelFile]
    problems: dict[tuple[int, int], Problem]
    results: dict[Key, Result]
    baselines: dict[int, float]  # problem id -> eager baseline mean (ms) on the run's hardware
    user: Any = None
    unscored: int = 0
    hashes: dict[Key, str] = field(default_factory=dict)  # each kernel file's source sha256
    notes: list[str] = field(default_factory=list)  # warnings found while writing
    created: list[Kernel] = field(default_factory=list)  # the kernels this import made


def store_run(spec: RunSpec, bundle: Bundle, *, by: Author, write: Callable[[str], None] | None = None) -> RunImport:
    """`by` imports a run. Check the bundle against the problem set, then write the run, its kernels and the imported
    evaluations in one transaction. Raises RowErrors (writing nothing) when anything is wrong.

    Phases: _check_kernels (every kernel names a problem of the set, once), parse_results,
    _result_warnings (results without kernels and kernels without results), _eager_baselines,
    then in one transaction _store_run_row, _store_kernels, _store_evaluations and
    _link_latest. The writes are bulk (a bounded number of queries whatever the run's size), so
    they send no model signals: the run is marked for re-scoring here (board_marks.mark_runs).
    """
    if named := [problem for text in (spec.model, *spec.aliases) if (problem := model_name_problem(text))]:
        raise RowErrors(named)
    if not bundle.kernels:
        raise RowErrors(["no kernel files (level_<L>_problem_<P>_sample_<S>_kernel.py) in the upload"])
    results = parse_results(bundle.results, {kernel.level for kernel in bundle.kernels}, spec.level)
    problems, seen = _check_kernels(spec, bundle.kernels)
    warnings = _result_warnings(results, seen, bundle.results is not None) + _kernel_warnings(bundle.kernels)
    plan = _Plan(spec, bundle.kernels, problems, results, _eager_baselines(spec), acting_user(by))
    _check_speedups(plan)
    plan.hashes = {(k.level, k.problem, k.sample): k.source_hash or source_sha256(k.source) for k in bundle.kernels}
    kernel_report, evaluation_report = ImportReport(), ImportReport()
    with transaction.atomic():
        run = _store_run_row(plan)
        if write and len(plan.kernels) >= 20:
            write(f"  writing {len(plan.kernels)} kernels and {len(results)} results")
        stored = _store_kernels(plan, run, kernel_report)
        evaluations = _store_evaluations(plan, run, stored, evaluation_report)
        linked, relinked = _link_latest(stored, evaluations)
        # After the evaluations: an inherited verdict is newer than the result it covers.
        if inherited := inherit_exclusions(plan.created):
            plan.notes.append(
                f"{inherited} kernel(s) have the code of a kernel judged a reward hack or invalid (comments and "
                "whitespace aside) and inherit its verdict: they stay out of the rankings"
            )
        if relinked:  # what the evaluation's post_save signal does for a kernel's new latest
            board_rescoring.refresh_kernel_states(relinked)
        if kernel_report.changed or evaluation_report.changed or linked:
            board_marks.mark_runs([run.pk])
        summary = f"{kernel_report.summary('kernels')}; {evaluation_report.summary('evaluations')}"
        WriteRecord.objects.note(by, "store_run", run, summary=summary)
    warnings.extend(plan.notes)
    if plan.unscored:
        warnings.append(
            f"{plan.unscored} correct kernel(s) have no speedup: no eager baseline for their problem on "
            f"{spec.hardware.slug}; they count as unscored until verified"
        )
    return RunImport(run, kernel_report, evaluation_report, warnings)


def _check_speedups(plan: _Plan) -> None:
    """RowErrors naming each correct result whose speedup (the eager baseline over its runtime) is
    over MAX_SPEEDUP: no such number is stored or shown (an infinite one took every board down)."""
    errors = []
    for (level, number, sample), result in sorted(plan.results.items()):
        problem = plan.problems.get((level, number))
        reference = plan.baselines.get(problem.pk) if problem else None
        if reference and result.runtime_ms and reference / result.runtime_ms > MAX_SPEEDUP:
            errors.append(
                f"{RESULTS_NAME}: level {level} problem {number} sample {sample}: runtime {result.runtime_ms!r} ms "
                f"against the eager baseline's {reference:g} ms is a speedup of {reference / result.runtime_ms:.3g}, "
                f"over the ceiling of {MAX_SPEEDUP:g}"
            )
    if errors:
        raise RowErrors(errors)


def _check_kernels(spec: RunSpec, kernels: list[KernelFile]) -> tuple[dict[tuple[int, int], Problem], dict[Key, str]]:
    """The set's problems by (level, number) and the kernels by key; RowErrors naming each
    kernel whose problem is not in the set, and each duplicate."""
    problems = {(p.level, p.number): p for p in Problem.objects.filter(problem_set=spec.problem_set)}
    errors: list[str] = []
    seen: dict[Key, str] = {}
    for kernel in kernels:
        key = (kernel.level, kernel.problem, kernel.sample)
        if (kernel.level, kernel.problem) not in problems:
            errors.append(
                f"{kernel.name}: problem {kernel.problem} of level {kernel.level} is not in {spec.problem_set.slug}"
            )
        elif key in seen:
            errors.append(f"{kernel.name}: duplicate of {seen[key]}")
        seen[key] = kernel.name
    if errors:
        raise RowErrors(errors)
    return problems, seen


def _result_warnings(results: dict[Key, Result], seen: dict[Key, str], has_results: bool) -> list[str]:
    warnings = [
        f"{RESULTS_NAME}: level {level} problem {number} sample {sample} has no kernel file; skipped"
        for (level, number, sample) in sorted(results)
        if (level, number, sample) not in seen
    ]
    no_result = sum(1 for key in seen if key not in results)
    if has_results and no_result:
        warnings.append(f"{no_result} kernel(s) have no result in {RESULTS_NAME}; they can be verified here")
    return warnings


def _kernel_warnings(kernels: list[KernelFile]) -> list[str]:
    """Kernel files that define no `class ModelNew` (imported all the same: the file is what the
    model wrote; verified, it ends as a compile error)."""
    lacking = [
        kernel.name for kernel in kernels if kernel.source and not MODEL_NEW.search(kernel.source)
    ]  # "" is withheld
    if not lacking:
        return []
    shown = ", ".join(lacking[:5]) + (f" and {len(lacking) - 5} more" if len(lacking) > 5 else "")
    n = len(lacking)
    ends = pluralize(n, "it ends,they end")
    return [
        f"no class ModelNew in {n} kernel file{pluralize(n)} ({shown}): imported; verified, {ends} as a compile error"
    ]


def _eager_baselines(spec: RunSpec) -> dict[int, float]:
    baselines = Baseline.objects.filter(
        problem__problem_set=spec.problem_set, hardware=spec.hardware, mode=Baseline.Mode.EAGER, compile_variant=""
    )
    return {baseline.problem_id: baseline.mean_ms for baseline in baselines}


def _store_run_row(plan: _Plan) -> Run:
    """The run this upload goes into: the first stored run of the same description (revisions
    included) whose kernels agree with the upload's sources, else a new run. A stored kernel's
    source never changes, so an upload that changes a source becomes a new revision of the run
    (named "<name> (revision N)"), and the stored run keeps its kernels, evaluations and verdicts."""
    spec = plan.spec
    identity = {
        "model": match_model(spec.model, match_lab(spec.organization), aliases=spec.aliases, source=spec.alias_source),
        "problem_set": spec.problem_set,
        "hardware": spec.hardware,
        "setting": spec.setting,
        "precision": spec.precision,
        "origin": Origin.IMPORTED,
    }
    values = {
        "samples_per_problem": max(spec.samples or 1, max(kernel.sample for kernel in plan.kernels) + 1),
        "notes": spec.notes,
    }
    identity["model"].lock()  # concurrent imports of this model agree on the run
    revisions = _revisions(identity, spec.name)
    # Only a run's creator (or a holder of write_any_run) names its revisions: another user's
    # upload is a run of its own, under the name it gave (not a revision of the owner's run that looks
    # like the owner's); the runs say who made them.
    own = [run for run in revisions if run.writable_by(plan.user)]
    conflicts = _source_conflicts(plan, own)
    run = next((run for run in own if run.pk not in conflicts), None)
    if run is None:
        run = Run.objects.create(**identity, **values, name=_revision_name(spec.name, own), created_by=plan.user)
        if revisions:
            stored = (own or revisions)[0]
            plan.notes.append(_revision_warning(run, stored, conflicts.get(stored.pk, [])))
        return run
    changed = _differs(run, values)
    if changed:
        for name in changed:
            setattr(run, name, values[name])
        run.save(update_fields=changed)
    return run


def _revisions(identity: dict, name: str) -> list[Run]:
    """The stored runs of this description: the one named `name` and its revisions, oldest first."""
    runs = Run.objects.filter(Q(name=name) | Q(name__startswith=f"{name} (revision "), **identity)
    return [run for run in runs.order_by("pk") if _revision_number(run.name, name) is not None]


def _revision_number(stored: str, name: str) -> int | None:
    if stored == name:
        return 1
    match = REVISION.fullmatch(stored[len(name) :]) if stored.startswith(name) else None
    return int(match.group(1)) if match else None


def _revision_name(name: str, revisions: list[Run]) -> str:
    if not revisions:
        return name
    number = max(_revision_number(run.name, name) or 1 for run in revisions) + 1
    suffix = f" (revision {number})"
    return name[: Run._meta.get_field("name").max_length - len(suffix)] + suffix


def _source_conflicts(plan: _Plan, runs: list[Run]) -> dict[int, list[Kernel]]:
    """Per run, its stored kernels whose source differs from the upload's for the same sample."""
    if not runs:
        return {}
    wanted = {
        (plan.problems[(level, number)].pk, sample): digest for (level, number, sample), digest in plan.hashes.items()
    }
    conflicts: dict[int, list[Kernel]] = {}
    stored = Kernel.objects.filter(run__in=runs).order_by("pk")
    for kernel in stored.only("pk", "run_id", "problem_id", "sample_index", "source_hash"):
        theirs = wanted.get((kernel.problem_id, kernel.sample_index))
        if theirs is not None and theirs != kernel.source_hash:
            conflicts.setdefault(kernel.run_id, []).append(kernel)
    return conflicts


def _revision_warning(run: Run, stored: Run, changed: list[Kernel]) -> str:
    if not changed:
        return (
            f"run {stored.pk} of this description is another user's (only its creator or a user with the "
            f"{WRITE_ANY_RUN} permission can import into it), so this upload is a new run, {run.pk} {run.name!r}"
        )
    first = changed[0]
    return (
        f"{len(changed)} kernel(s) differ from those stored in run {stored.pk} (e.g. kernel {first.pk}, problem "
        f"{first.problem_id} sample {first.sample_index}); a stored kernel's source never changes, so this "
        f"upload is a new run, {run.pk} {run.name!r}, and run {stored.pk} keeps its kernels and evaluations"
    )


def _differs(row: Any, values: dict) -> list[str]:
    """The names of `values` that differ from the stored row's."""
    return [name for name, value in values.items() if getattr(row, name) != value]


def _store_kernels(plan: _Plan, run: Run, report: ImportReport) -> list[tuple[Key, Kernel]]:
    """Create the run's new kernels in bulk; a stored one is left as it is (_store_run_row chose
    a run whose stored sources agree with the upload). Returns every kernel by key, in key order.
    The source hash is computed here, as Kernel.save would."""
    existing = {
        (kernel.problem_id, kernel.sample_index): kernel
        for kernel in Kernel.objects.filter(run=run).order_by().only(*_KERNEL_READ)
    }
    stored, created = [], []
    for file in sorted(plan.kernels, key=lambda k: (k.level, k.problem, k.sample)):
        problem = plan.problems[(file.level, file.problem)]
        kernel = existing.get((problem.pk, file.sample))
        if kernel is None:
            kernel = Kernel(
                run=run,
                problem=problem,
                sample_index=file.sample,
                submitted_by=plan.user,
                source=file.source,
                source_hash=plan.hashes[(file.level, file.problem, file.sample)],
                source_bytes=utf8_size(file.source),
                backend=guess_backend(file.source) if file.source else Kernel.Backend.OTHER,
                source_url=file.source_url,
            )
            created.append(kernel)
            report.add(CREATED)
        else:
            report.add(UNCHANGED)
        stored.append(((file.level, file.problem, file.sample), kernel))
    check_source_bytes(plan.user, sum(kernel.source_bytes for kernel in created))
    Kernel.objects.bulk_create(created, batch_size=BATCH_SIZE)
    plan.created = created
    _fill_withheld(plan, run, report)
    return stored


def _fill_withheld(plan: _Plan, run: Run, report: ImportReport) -> None:
    """Kernels of the run stored without their source (only the public file's hash) get it from
    the upload where its hash is theirs: the one write of a source Kernel.save allows."""
    files = {(f.level, f.problem, f.sample): f for f in plan.kernels if f.source}
    withheld = Kernel.objects.filter(run=run, source="").select_related("problem")
    for kernel in withheld:
        file = files.get((kernel.problem.level, kernel.problem.number, kernel.sample_index))
        if file is not None and plan.hashes[(file.level, file.problem, file.sample)] == kernel.source_hash:
            kernel.source, kernel.backend = file.source, guess_backend(file.source)
            kernel.save(update_fields=["source", "source_hash", "source_bytes", "backend"])
            report.counts[UNCHANGED] -= 1  # counted unchanged by _store_kernels: its source is filled in
            report.add(UPDATED)


def _evaluation_values(plan: _Plan, problem_id: int, result: Result) -> dict:
    """An imported evaluation's fields; its speedup comes from the eager baseline, if any."""
    hardware = plan.spec.hardware
    reference = plan.baselines.get(problem_id)
    speedup = plausible_speedup(reference, result.runtime_ms) if result.correct else None
    notes = [{"code": "imported", "metadata": result.metadata}] if result.metadata else []
    if result.correct and speedup is None:
        plan.unscored += 1
        notes.append(
            {"code": "no_speedup", "text": f"no eager baseline on {hardware.slug} or no runtime: speedup unknown"}
        )
    return {
        "state": Evaluation.State.DONE,
        "status": _status(result),
        "compiled": result.compiled,
        "correct": result.correct,
        "kernel_ms": result.runtime_ms,
        "reference_ms": reference if speedup else None,
        "speedup": speedup,
        "kernel_timing": result.stats,
        "notes": notes,
    }


def _store_evaluations(
    plan: _Plan, run: Run, stored: list[tuple[Key, Kernel]], report: ImportReport
) -> dict[int, tuple[Evaluation, int | None]]:
    """Create the imported evaluation of each kernel with a result, in bulk. A stored evaluation is
    never rewritten: a result that differs from the kernel's newest imported one is a new
    evaluation (counted as updated), and the old one stays in the history. Returns, by kernel id,
    the kernel's imported evaluation and the id of the one it supersedes (None if none)."""
    hardware = plan.spec.hardware
    existing: dict[int, Evaluation] = {}
    imported = Evaluation.objects.filter(kernel__run=run, hardware=hardware, origin=Origin.IMPORTED)
    for evaluation in imported.order_by("-queued_at", "-pk"):
        existing.setdefault(evaluation.kernel_id, evaluation)
    evaluations: dict[int, tuple[Evaluation, int | None]] = {}
    created = []
    now = timezone.now()
    for key, kernel in stored:
        result = plan.results.get(key)
        if result is None:
            continue
        values = _evaluation_values(plan, kernel.problem_id, result)
        previous = existing.get(kernel.pk)
        if previous is not None and not _differs(previous, values):
            report.add(UNCHANGED)
            evaluations[kernel.pk] = (previous, None)
            continue
        evaluation = Evaluation(kernel=kernel, hardware=hardware, origin=Origin.IMPORTED, finished_at=now, **values)
        created.append(evaluation)
        report.add(CREATED if previous is None else UPDATED)
        evaluations[kernel.pk] = (evaluation, previous.pk if previous else None)
    Evaluation.objects.bulk_create(created, batch_size=BATCH_SIZE)
    return evaluations


def _link_latest(
    stored: list[tuple[Key, Kernel]], evaluations: dict[int, tuple[Evaluation, int | None]]
) -> tuple[int, list[int]]:
    """Make the imported evaluation the latest of each kernel that has none yet, or whose latest
    is the imported one it supersedes (an evaluation measured here stays the latest), in one bulk
    update. Returns how many were linked and the ids of those whose latest was another one."""
    linked, relinked = [], []
    for _, kernel in stored:
        evaluation, superseded = evaluations.get(kernel.pk, (None, None))
        if evaluation is None or kernel.latest_evaluation_id == evaluation.pk:
            continue
        if kernel.latest_evaluation_id is not None and kernel.latest_evaluation_id == superseded:
            relinked.append(kernel.pk)
        elif kernel.latest_evaluation_id is not None:
            continue
        kernel.latest_evaluation = evaluation
        linked.append(kernel)
    Kernel.objects.bulk_update(linked, ["latest_evaluation"], batch_size=BATCH_SIZE)
    return len(linked), relinked


@transaction.atomic
def verify_run(run: Run, *, by: Author) -> tuple[list[Evaluation], int]:
    """Queue every kernel of `run` for evaluation here on the run's hardware, for `by` (a user, or
    the command an operator ran). Kernels that already have an evaluation queued or running there are
    skipped. Returns (queued, skipped count).

    PermissionDenied unless the user may write into the run (Run.writable_by); QuotaExceeded, with
    nothing queued, past the user's quota of pending evaluations. The run's row is locked first, so
    two concurrent verifies of one run take turns and the second finds the first's evaluations."""
    user = acting_user(by)
    if not run.writable_by(user):
        raise PermissionDenied(
            f"run {run.pk} is not yours: only its creator or a user with the {WRITE_ANY_RUN} permission can verify it"
        )
    list(Run.objects.select_for_update().filter(pk=run.pk).values_list("pk"))
    kernels = list(run.kernels.order_by("problem__level", "problem__number", "sample_index"))
    requested = request_evaluations(kernels, run.hardware, user)
    summary = f"{len(requested.queued)} queued, {len(requested.skipped)} already waiting"
    WriteRecord.objects.note(by, "verify_run", run, summary=summary)
    return requested.queued, len(requested.skipped)


@transaction.atomic
def rescore_run(run: Run, rules: ScoringRules, *, by: Author) -> tuple[list[Evaluation], int]:
    """Score `run` again under `rules`: the run records them and every kernel is queued for a new
    evaluation under them (verify_run's skips apply). Earlier evaluations and their verdicts stay as
    history; each kernel's place on the boards moves to the new rules as its evaluation finishes.
    As verify_run: the run must be `by`'s to write into, and the user's quota applies (the
    transaction then rolls the rules back too)."""
    Run.objects.filter(pk=run.pk).update(rules=rules)
    run.rules = rules
    WriteRecord.objects.note(by, "rescore_run", run, summary=f"under {rules.name}")
    return verify_run(run, by=by)
