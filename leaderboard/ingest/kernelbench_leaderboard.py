"""Importing KernelBench's original public leaderboard: a checkout of anneouyang/KernelBenchLeaderboard
(or the figures-only file made from one: leaderboard/ingest/field_figures.py).

Its layout:

    docs/assets/raw_data.json          every kernel it published (413): [{"problem_id": 0, "level": 1,
                                         "model": "o1-preview-2024-09-12", "display_name": "gpt-o1",
                                         "file": "<hash>", "code": "...", "torch_speedup": 1.2,
                                         "torch_compile_speedup": 0.8, "baseline_torch_time": 6.16,
                                         "baseline_torch_compile_time": 1.58, "kernel_eval_time": 451.0}, ...]
    docs/assets/data.json              what its page ranks: {"Level <L>: <N>_<Name>": [{"display_name",
                                         "torch_speedup", "file"}, ...]}: every problem's name, and
                                         the top 5 kernels of each (383)
    docs/assets/solutions/<hash>.py    each kernel (the same code as raw_data.json's)
    docs/assets/problems/l<L>_p<N>.py  the problem text those kernels were written and timed against

raw_data.json's problem_id counts from 0 (problem_id 0 is problem 1, "Level 1: 1_Square_matrix_
multiplication_"): RAW_PROBLEM_OFFSET, checked against data.json for every kernel it ranks. Times
are milliseconds on an NVIDIA L40S. What is stored:

- the leaderboard's own problem texts, as the problem set LEADERBOARD_SET_NAME (scored by
  KernelBench v0's rules, the version they come from): every kernel is imported against the text
  it was written for, never against a different reference. KernelBench's problems have changed
  since (sizes, inputs), so each text is compared with a set imported from KernelBench
  (`compare_with`): the same text is "matched"; a different or missing one is "not comparable".
  The comparison is printed, and written in the set's description and each run's notes;
- one imported run per model, through run_import.store_run (idempotent; a changed kernel becomes
  a revision, never an edited source), on the hardware that will measure it here (`--hardware`),
  with setting PUBLISHED_SETTING and `published_source` set. Models are found by the source's
  identifier and display name (model_names.match_model: exact aliases, never a guess);
- each kernel's published figures as a PublishedFigure on the GPU they were timed on (the `l40s`
  hardware, never the run's), with `ranked_by_source` for the kernels data.json ranks, and the
  eager speedup denormalised into Kernel.published_speedup / published_hardware. No Evaluation is
  made from them: fast_p and the read model count only evaluations measured (verify_field) or
  imported (import_results) here.

A kernel or problem read from the figures-only file has no source: it is stored with source "",
the public file's hash and its URL (Kernel.source_url, Problem.source_url); importing the checkout
later fills the source in (the hash must match). Files are read, never run. Everything is checked
before anything is written (MalformedInput names the file and key); one transaction writes it all.
"""

from __future__ import annotations

import json
import math
import operator
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import reduce
from pathlib import Path

from django.db import transaction
from django.db.models import F, Q

from evaluation.results.metrics import MIN_RUNTIME_MS, speedup_problem
from leaderboard.boards import marks as board_marks
from leaderboard.evaluations.queue import Requested, request_evaluations
from leaderboard.ingest.archives import Bundle, KernelFile
from leaderboard.ingest.run_import import RunImport, RunSpec, store_run
from leaderboard.models import Author, Evaluation, Kernel, PublishedFigure, Run, WriteRecord
from problems.importing import ImportReport, upsert
from problems.kernelbench_files import MalformedInput, guess_tags, missing_definitions, read_source
from problems.models import Hardware, Problem, ProblemSet, ScoringRules, source_sha256

LEADERBOARD_SET_NAME = "KernelBench leaderboard (original)"
LEADERBOARD_SET_SLUG = "kernelbench-leaderboard"
SOURCE_URL = "https://github.com/anneouyang/KernelBenchLeaderboard"
PUBLISHED_SOURCE = "KernelBench's original leaderboard (anneouyang/KernelBenchLeaderboard)"
PUBLISHED_HARDWARE = "L40S"
# The hardware record the published figures are stored on (made on first use).
PUBLISHED_HARDWARE_SLUG, PUBLISHED_HARDWARE_NAME = "l40s", "NVIDIA L40S"
PUBLISHED_SETTING = "best correct (published)"
RUN_NAME = "KernelBench leaderboard"
# The KernelBench version whose problem texts (and rules) the leaderboard used.
LEADERBOARD_VERSION = "v0"
# raw_data.json's problem_id + this = the problem's number (data.json's key, the problem file's name).
RAW_PROBLEM_OFFSET = 1
# Labs by the leaderboard's names' prefixes (a new model's lab; known models keep theirs).
LABS = {
    "claude": "Anthropic", "gpt": "OpenAI", "o1": "OpenAI", "gemini": "Google", "llama": "Meta",
    "meta-llama": "Meta", "deepseek": "DeepSeek",
}  # fmt: skip

PROBLEM_KEY = re.compile(r"^Level ([1-4]): ([1-9]\d{0,5})_(\S{1,150})$", re.ASCII)
SOLUTION_FILE = re.compile(r"^[0-9A-Za-z_-]{1,100}$", re.ASCII)
SHA256 = re.compile(r"^[0-9a-f]{64}$", re.ASCII)
MAX_NAME = 120
FIGURE_KEYS = {  # PublishedFigure field: raw_data.json key
    "speedup_eager": "torch_speedup",
    "speedup_compile": "torch_compile_speedup",
    "runtime_ms": "kernel_eval_time",
    "reference_eager_ms": "baseline_torch_time",
    "reference_compile_ms": "baseline_torch_compile_time",
}


def public_url(commit: str, path: str) -> str:
    """A file of the leaderboard's repository at `commit`, on GitHub."""
    return f"{SOURCE_URL}/blob/{commit}/{path}"


@dataclass(frozen=True)
class ListedProblem:
    level: int
    number: int
    name: str
    source: str  # "" when withheld (read from the figures-only file)
    source_hash: str = ""
    source_url: str = ""
    tags: str = ""

    @property
    def hash(self) -> str:
        return self.source_hash or source_sha256(self.source)


@dataclass(frozen=True)
class ListedKernel:
    model: str  # the source's identifier (raw_data.json "model")
    display_name: str  # its page's name (data.json "display_name")
    level: int
    number: int
    source: str  # "" when withheld
    file: str
    figures: dict  # PublishedFigure field: value (FIGURE_KEYS), correct included
    ranked: bool = False  # data.json ranks it (the original page shows it)
    source_hash: str = ""
    source_url: str = ""

    @property
    def hash(self) -> str:
        return self.source_hash or source_sha256(self.source)

    @property
    def published_speedup(self) -> float | None:
        return self.figures.get("speedup_eager")


@dataclass
class Leaderboard:
    problems: list[ListedProblem]
    kernels: list[ListedKernel]
    commit: str = "main"

    @property
    def models(self) -> list[str]:
        return sorted({kernel.model for kernel in self.kernels})


@dataclass
class Comparison:
    """The leaderboard's problem texts against a set imported from KernelBench."""

    other: ProblemSet | None
    matched: list[tuple[int, int]] = field(default_factory=list)
    differing: list[tuple[int, int]] = field(default_factory=list)
    absent: list[tuple[int, int]] = field(default_factory=list)

    @property
    def not_comparable(self) -> list[tuple[int, int]]:
        return sorted(self.differing + self.absent)

    @property
    def summary(self) -> str:
        if self.other is None:
            return "not compared with a set imported from KernelBench (none given or found)"
        return (
            f"compared with {self.other.name} ({self.other.slug}): {len(self.matched)} problem(s) have the same text "
            f"(matched); {len(self.not_comparable)} are not comparable ({len(self.differing)} have a different text, "
            f"{len(self.absent)} are not in it), so their kernels answer the leaderboard's own text only"
        )


@dataclass
class LeaderboardImport:
    problem_set: ProblemSet
    problems: ImportReport
    runs: list[RunImport]
    comparison: Comparison
    published: int = 0  # kernels whose published figures were written or changed
    counts: dict[str, Counter] = field(default_factory=dict)  # model name: kernels per level


# ---------------------------------------------------------------------------------------------
# reading the checkout


def assets_folder(path: Path) -> Path:
    """The checkout's docs/assets folder (the checkout itself, or that folder, may be given)."""
    for candidate in (path / "docs" / "assets", path):
        if (candidate / "raw_data.json").is_file() and (candidate / "data.json").is_file():
            return candidate
    raise MalformedInput(f"{path}: no docs/assets/raw_data.json and data.json (a checkout of {SOURCE_URL} is expected)")


def read_leaderboard(path: Path, commit: str = "main") -> Leaderboard:
    """Every published kernel of a checkout (raw_data.json) and its problems (data.json's names,
    the problem files' texts), with which kernels data.json ranks; MalformedInput naming every
    fault found. `commit` is the checkout's commit, for the links to its files."""
    assets = assets_folder(path)
    data = _read_json(assets / "data.json", dict, "an object keyed by 'Level <L>: <N>_<Name>'")
    problems, ranked, errors = [], {}, []
    for key, entries in data.items():
        try:
            problem = _read_problem(assets, str(key), commit)
            problems.append(problem)
            ranked.update(_read_ranked(problem, key, entries))
        except MalformedInput as exc:
            errors.append(str(exc))
    named = {(p.level, p.number) for p in problems}
    raw = _read_json(assets / "raw_data.json", list, "a list of kernels")
    kernels = []
    for index, entry in enumerate(raw):
        try:
            kernels.append(_read_kernel(assets, index, entry, named, ranked, commit))
        except MalformedInput as exc:
            errors.append(str(exc))
    errors += _duplicates(problems, kernels) + _unlisted(ranked, kernels)
    if errors:
        raise MalformedInput("; ".join(errors[:20]) + (f"; and {len(errors) - 20} more" if len(errors) > 20 else ""))
    return Leaderboard(problems, kernels, commit)


def _read_json(path: Path, shape: type, what: str):
    try:
        data = json.loads(read_source(path))
    except json.JSONDecodeError as exc:
        raise MalformedInput(f"{path}:{exc.lineno}: not JSON: {exc.msg}") from None
    if not isinstance(data, shape):
        raise MalformedInput(f"{path}: must be {what}")
    return data


def _read_problem(assets: Path, key: str, commit: str) -> ListedProblem:
    match = PROBLEM_KEY.match(key)
    if not match:
        raise MalformedInput(f"data.json: key {key[:60]!r} is not 'Level <L>: <N>_<Name>'")
    level, number, name = int(match[1]), int(match[2]), match[3]
    relative = f"problems/l{level}_p{number}.py"
    path = assets / relative
    if not path.is_file():
        raise MalformedInput(f"data.json: key {key!r}: no problem file {path}")
    source = read_source(path)
    missing = missing_definitions(source, path)
    if missing:
        raise MalformedInput(f"{path}: does not define {', '.join(missing)}")
    url = public_url(commit, f"docs/assets/{relative}")
    return ListedProblem(level, number, name, source, source_url=url, tags=guess_tags(level, name, source))


def _read_ranked(problem: ListedProblem, key: str, entries) -> dict[str, tuple[int, int]]:
    """The files data.json ranks for this problem, each with its (level, number)."""
    if not isinstance(entries, list):
        raise MalformedInput(f"data.json: {key!r} must be a list of kernels")
    files = {}
    for index, entry in enumerate(entries):
        file = entry.get("file") if isinstance(entry, dict) else None
        if not isinstance(file, str) or not SOLUTION_FILE.match(file):
            raise MalformedInput(f"data.json: {key!r} entry {index}: file must be a solution's name")
        files[file] = (problem.level, problem.number)
    return files


def _text(entry: dict, name: str, where: str) -> str:
    value = entry.get(name)
    if not isinstance(value, str) or not value.strip() or len(value) > MAX_NAME or not value.isprintable():
        raise MalformedInput(f"{where}: {name} must be a model name")
    return value.strip()


def _figures(entry: dict, where: str) -> dict:
    """The published figures of one raw_data.json entry: each a finite positive number (or absent)."""
    figures: dict = {"correct": True}  # the leaderboard published correct kernels only
    for name, key in FIGURE_KEYS.items():
        value = entry.get(key)
        if value is None:
            figures[name] = None
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
            raise MalformedInput(f"{where}: {key} must be a positive number, not {value!r}")
        # A time under the physical floor, a speedup over the ceiling: made-up numbers (an infinite
        # speedup took every board down).
        wrong = speedup_problem(value) if name.startswith("speedup") else None
        if wrong or (name.endswith("_ms") and value < MIN_RUNTIME_MS):
            raise MalformedInput(f"{where}: {key} {wrong or f'{value!r} ms is under the physical floor'}")
        figures[name] = float(value)
    if figures["speedup_eager"] is None:
        raise MalformedInput(f"{where}: torch_speedup is missing")
    return figures


def _read_kernel(assets: Path, index: int, entry, named: set, ranked: dict, commit: str) -> ListedKernel:
    where = f"raw_data.json: entry {index}"
    if not isinstance(entry, dict):
        raise MalformedInput(f"{where}: must be an object")
    level, problem_id, file = entry.get("level"), entry.get("problem_id"), entry.get("file")
    if not isinstance(file, str) or not SOLUTION_FILE.match(file):
        raise MalformedInput(f"{where}: file must be a solution's name (letters, digits, - and _)")
    if type(level) is not int or type(problem_id) is not int or problem_id < 0:
        raise MalformedInput(f"{where}: level and problem_id must be whole numbers")
    key = (level, problem_id + RAW_PROBLEM_OFFSET)
    if key not in named:
        raise MalformedInput(f"{where}: level {level} problem_id {problem_id} (problem {key[1]}) is not in data.json")
    if file in ranked and ranked[file] != key:
        raise MalformedInput(
            f"{where}: data.json ranks {file} under level {ranked[file][0]} problem {ranked[file][1]}, "
            f"not problem_id {problem_id} + {RAW_PROBLEM_OFFSET}"
        )
    code = entry.get("code")
    if not isinstance(code, str) or not code.strip():
        raise MalformedInput(f"{where}: code must be the kernel's source")
    path = assets / "solutions" / f"{file}.py"
    if path.is_file() and read_source(path) != code:
        raise MalformedInput(f"{where}: code differs from {path}")
    return ListedKernel(
        _text(entry, "model", where), _text(entry, "display_name", where), key[0], key[1], code, file,
        _figures(entry, where), file in ranked, source_url=public_url(commit, f"docs/assets/solutions/{file}.py"),
    )  # fmt: skip


def _duplicates(problems: list[ListedProblem], kernels: list[ListedKernel]) -> list[str]:
    errors = []
    for (level, number), n in Counter((p.level, p.number) for p in problems).items():
        if n > 1:
            errors.append(f"data.json: level {level} problem {number} is listed twice")
    for (model, level, number), n in Counter((k.model.lower(), k.level, k.number) for k in kernels).items():
        if n > 1:
            errors.append(f"raw_data.json: {n} kernels of {model!r} for level {level} problem {number}")
    return errors


def _unlisted(ranked: dict, kernels: list[ListedKernel]) -> list[str]:
    files = {kernel.file for kernel in kernels}
    return [f"data.json ranks {file}, which raw_data.json does not hold" for file in sorted(set(ranked) - files)]


# ---------------------------------------------------------------------------------------------
# comparing problem texts


def same_text(a: str, b: str) -> bool:
    """Whether two problem files say the same thing: equal once line endings and trailing spaces
    are set aside (a changed size, input or operation is a different problem)."""

    def normal(text: str) -> list[str]:
        return [line.rstrip() for line in text.replace("\r\n", "\n").strip().split("\n")]

    return normal(a) == normal(b)


def _same(stored: Problem, listed: ListedProblem) -> bool:
    """Texts compared by same_text; where either is withheld, by hash (exact bytes)."""
    if stored.source and listed.source:
        return same_text(stored.source, listed.source)
    return stored.source_hash == listed.hash


def compare(problems: list[ListedProblem], other: ProblemSet | None) -> Comparison:
    comparison = Comparison(other)
    if other is None:
        return comparison
    theirs = {(p.level, p.number): p for p in Problem.objects.filter(problem_set=other)}
    for problem in problems:
        key = (problem.level, problem.number)
        if key not in theirs:
            comparison.absent.append(key)
        elif _same(theirs[key], problem):
            comparison.matched.append(key)
        else:
            comparison.differing.append(key)
    return comparison


# ---------------------------------------------------------------------------------------------
# storing


def published_hardware() -> Hardware:
    """The GPU the published figures were timed on (made on first use)."""
    hardware, _ = Hardware.objects.get_or_create(
        slug=PUBLISHED_HARDWARE_SLUG, defaults={"name": PUBLISHED_HARDWARE_NAME, "kind": Hardware.Kind.GPU}
    )
    return hardware


def store_leaderboard(
    board: Leaderboard, hardware: Hardware, compare_with: ProblemSet | None, write: Callable[[str], None], *, by: Author
) -> LeaderboardImport:
    """`by` imports the leaderboard. Phases, in one transaction: _store_set (the leaderboard's problem set, its rules and the
    comparison), _store_problems (its texts), then per model store_run (its run and kernels, on
    `hardware`, which measures them here) and _store_published (each kernel's published figures,
    on the l40s hardware)."""
    comparison = compare(board.problems, compare_with)
    with transaction.atomic():
        problem_set = _store_set(comparison)
        problems = _store_problems(problem_set, board.problems)
        result = LeaderboardImport(problem_set, problems, [], comparison)
        timed_on = published_hardware()
        for model in board.models:
            listed = [kernel for kernel in board.kernels if kernel.model == model]
            run_import = store_run(_spec(listed[0], hardware, problem_set, comparison), _bundle(listed), by=by)
            _mark_published(run_import.run)
            result.published += _store_published(run_import.run, listed, timed_on)
            result.runs.append(run_import)
            result.counts[run_import.run.model.name] = Counter(kernel.level for kernel in listed)
        WriteRecord.objects.note(by, "store_leaderboard", problem_set, summary=f"{len(result.runs)} runs")
    return result


def _store_set(comparison: Comparison) -> ProblemSet:
    rules = ScoringRules.objects.for_version(LEADERBOARD_VERSION)
    description = (
        f"The problem texts of {PUBLISHED_SOURCE}, as its kernels were written and timed against them "
        f"(KernelBench {LEADERBOARD_VERSION}). On the last import, {comparison.summary}."
    )
    problem_set, _ = upsert(
        ProblemSet,
        {"slug": LEADERBOARD_SET_SLUG},
        {"name": LEADERBOARD_SET_NAME, "version": LEADERBOARD_VERSION, "description": description,
         "source_url": SOURCE_URL, "rules": rules},
    )  # fmt: skip
    return problem_set


def _store_problems(problem_set: ProblemSet, problems: list[ListedProblem]) -> ImportReport:
    """Upsert the set's problems. A problem that already has kernels keeps its text: changing it
    would silently change the reference those kernels were judged against (MalformedInput). A
    withheld text never replaces a stored one; a stored withheld text is filled in when the text
    given has its hash."""
    stored = {(p.level, p.number): p for p in Problem.objects.filter(problem_set=problem_set)}
    with_kernels = set(Kernel.objects.filter(problem__problem_set=problem_set).values_list("problem_id", flat=True))
    changed = [
        f"level {p.level} problem {p.number}"
        for p in problems
        if (p.level, p.number) in stored
        and stored[(p.level, p.number)].pk in with_kernels
        and not _same(stored[(p.level, p.number)], p)
    ]
    if changed:
        raise MalformedInput(
            f"the leaderboard's text of {', '.join(changed[:10])} differs from the one stored, which has kernels: "
            "a stored reference never changes under its kernels (import into a fresh database, or delete those runs)"
        )
    report = ImportReport()
    for problem in problems:
        values = {"name": problem.name, "tags": problem.tags, "source_url": problem.source_url}
        have = stored.get((problem.level, problem.number))
        if problem.source or have is None or not have.source:  # a withheld text never replaces one stored
            values.update(source=problem.source, source_hash=problem.hash)
        _, outcome = upsert(
            Problem, {"problem_set": problem_set, "level": problem.level, "number": problem.number}, values
        )
        report.add(outcome)
    return report


def _spec(first: ListedKernel, hardware: Hardware, problem_set: ProblemSet, comparison: Comparison) -> RunSpec:
    lab = next((lab for prefix, lab in LABS.items() if first.model.lower().startswith(prefix)), "")
    return RunSpec(
        model=first.model,
        aliases=(first.display_name,),
        alias_source=PUBLISHED_SOURCE,
        organization=lab,
        hardware=hardware,
        problem_set=problem_set,
        setting=PUBLISHED_SETTING,
        name=RUN_NAME,
        # What the run is, the pages say from published_source; the notes keep what this import found.
        notes=f"Problem texts {comparison.summary}.",
    )


def _bundle(kernels: list[ListedKernel]) -> Bundle:
    return Bundle(
        kernels=[
            KernelFile(f"solutions/{k.file}.py", k.level, k.number, 0, k.source, k.hash, k.source_url) for k in kernels
        ]
    )


def _mark_published(run: Run) -> None:
    if run.published_source != PUBLISHED_SOURCE:
        Run.objects.filter(pk=run.pk).update(published_source=PUBLISHED_SOURCE)
        run.published_source = PUBLISHED_SOURCE


def _store_published(run: Run, listed: list[ListedKernel], timed_on: Hardware) -> int:
    """Each kernel's published figures (a PublishedFigure on `timed_on`) and its eager speedup on the
    kernel (one bulk update of the kernels that differ); how many kernels changed."""
    by_key = {(k.level, k.number): k for k in listed}
    changed, figures_changed = [], 0
    for kernel in Kernel.objects.filter(run=run, sample_index=0).select_related("problem"):
        item = by_key.get((kernel.problem.level, kernel.problem.number))
        if item is None:
            continue
        values = {**item.figures, "ranked_by_source": item.ranked, "source": PUBLISHED_SOURCE}
        _, outcome = upsert(PublishedFigure, {"kernel": kernel, "hardware": timed_on, "source_url": SOURCE_URL}, values)
        figures_changed += outcome != "unchanged"
        if (kernel.published_speedup, kernel.published_hardware) != (item.published_speedup, PUBLISHED_HARDWARE):
            kernel.published_speedup, kernel.published_hardware = item.published_speedup, PUBLISHED_HARDWARE
            changed.append(kernel)
    Kernel.objects.bulk_update(changed, ["published_speedup", "published_hardware"], batch_size=500)
    if changed or figures_changed:  # the boards show published figures apart: their cached pages must be rebuilt
        board_marks.mark_runs([run.pk])
    return max(len(changed), figures_changed)


# ---------------------------------------------------------------------------------------------
# verifying here


def verify_field(
    problem_set: ProblemSet,
    hardware: Hardware,
    levels: list[int] | None = None,
    limit: int | None = None,
    *,
    by: Author,
    problems: list[tuple[int, int]] | None = None,
) -> tuple[Requested, int]:
    """`by` queues the set's kernels (of `levels`, of `problems` as (level, number)) for evaluation
    on `hardware` through the normal queue, highest published speedup first (so a GPU host lent for
    part of the field settles the claims that decide fast_p first: a kernel left unmeasured claims
    less than every measured one), then level, problem and model, skipping kernels without stored
    source, those waiting for an evaluation there, and those that already have a finished one there
    under their run's rules (so each call goes on where the last stopped); at most `limit`. Returns
    what was requested and how many kernels are left after it."""
    kernels = Kernel.objects.filter(
        problem__problem_set=problem_set, run__published_source=PUBLISHED_SOURCE, run__hardware=hardware
    )
    if levels:
        kernels = kernels.filter(problem__level__in=levels)
    if problems:
        kernels = kernels.filter(
            reduce(operator.or_, (Q(problem__level=lvl, problem__number=n) for lvl, n in problems))
        )
    done = Evaluation.objects.filter(hardware=hardware, state=Evaluation.State.DONE, origin="measured")
    done_keys = set(done.filter(kernel__in=kernels).values_list("kernel_id", "rules_id"))
    waiting = set(
        Evaluation.objects.pending().filter(hardware=hardware, kernel__in=kernels).values_list("kernel_id", flat=True)
    )
    todo = [
        kernel
        for kernel in kernels.exclude(source="")
        .select_related("run")
        .order_by(
            F("published_speedup").desc(nulls_last=True), "problem__level", "problem__number", "run__model__name", "pk"
        )
        if (kernel.pk, kernel.run.rules_id) not in done_keys and kernel.pk not in waiting
    ]
    chosen = todo if limit is None else todo[:limit]
    requested = request_evaluations(chosen, hardware, None)
    WriteRecord.objects.note(
        by, "verify_field", problem_set, summary=f"{len(requested.queued)} queued on {hardware.slug}"
    )
    return requested, len(todo) - len(chosen)
