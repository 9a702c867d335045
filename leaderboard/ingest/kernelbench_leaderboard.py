"""Importing KernelBench's original public leaderboard: a checkout of anneouyang/KernelBenchLeaderboard.

Its layout:

    docs/assets/data.json              {"Level <L>: <N>_<Name>": [{"display_name": "gpt-o1",
                                         "torch_speedup": 1.23, "file": "<hash>"}, ...], ...}
    docs/assets/solutions/<hash>.py    a kernel (class ModelNew)
    docs/assets/problems/l<L>_p<N>.py  the problem text those kernels were written and timed against

The leaderboard lists, for each problem, the best correct kernel of each model that had one, with
its speedup over PyTorch eager on an NVIDIA L40S. What is stored:

- the leaderboard's own problem texts, as the problem set LEADERBOARD_SET_NAME (scored by
  KernelBench v0's rules, the version they come from): every kernel is imported against the text
  it was written for, never against a different reference. KernelBench's problems have changed
  since (sizes, inputs), so each text is compared with a set imported from KernelBench
  (`compare_with`): the same text is "matched"; a different or missing one is "not comparable"
  (runs of that set and these kernels answer different problems there). The comparison is printed,
  and written in the set's description and each run's notes;
- one imported run per model (the file's display_name), through run_import.store_run (so it is
  idempotent, and a changed kernel becomes a revision, never an edited source), with setting
  PUBLISHED_SETTING and `published_source` set: the run holds only the listed kernels, so every
  problem the leaderboard does not list for that model counts as failed in its fast_p;
- each published speedup in Kernel.published_speedup, labelled by published_hardware ("L40S").
  No Evaluation is made from it: fast_p, rankings and the read model only ever count evaluations,
  which `verify` makes here.

Files are read, never run. Everything is checked before anything is written (MalformedInput
names the file and key); one transaction writes it all.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from django.db import transaction

from leaderboard.ingest.archives import Bundle, KernelFile
from leaderboard.ingest.run_import import RunImport, RunSpec, store_run
from leaderboard.models import Kernel, Run
from leaderboard.reads.board import store as board_store
from problems.importing import ImportReport, upsert
from problems.kernelbench_files import MalformedInput, guess_tags, missing_definitions, read_source
from problems.models import Hardware, Problem, ProblemSet, ScoringRules

LEADERBOARD_SET_NAME = "KernelBench leaderboard (original)"
LEADERBOARD_SET_SLUG = "kernelbench-leaderboard"
SOURCE_URL = "https://github.com/anneouyang/KernelBenchLeaderboard"
PUBLISHED_SOURCE = "KernelBench's original leaderboard (anneouyang/KernelBenchLeaderboard)"
PUBLISHED_HARDWARE = "L40S"
PUBLISHED_SETTING = "best correct (published)"
RUN_NAME = "KernelBench leaderboard"
# The KernelBench version whose problem texts (and rules) the leaderboard used.
LEADERBOARD_VERSION = "v0"
# The leaderboard's names, by prefix, and the labs that made them.
LABS = {"claude": "Anthropic", "gpt": "OpenAI", "gemini": "Google", "llama": "Meta", "deepseek": "DeepSeek"}

PROBLEM_KEY = re.compile(r"^Level ([1-4]): ([1-9]\d{0,5})_(\S{1,150})$", re.ASCII)
SOLUTION_FILE = re.compile(r"^[0-9A-Za-z_-]{1,100}$", re.ASCII)
MAX_NAME = 120


@dataclass(frozen=True)
class ListedProblem:
    level: int
    number: int
    name: str
    source: str


@dataclass(frozen=True)
class ListedKernel:
    model: str
    level: int
    number: int
    source: str
    published_speedup: float
    file: str


@dataclass
class Leaderboard:
    problems: list[ListedProblem]
    kernels: list[ListedKernel]

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
    published: int = 0  # published figures written or changed


# ---------------------------------------------------------------------------------------------
# reading the checkout


def assets_folder(path: Path) -> Path:
    """The checkout's docs/assets folder (the checkout itself, or that folder, may be given)."""
    for candidate in (path / "docs" / "assets", path):
        if (candidate / "data.json").is_file():
            return candidate
    raise MalformedInput(f"{path}: no docs/assets/data.json (a checkout of {SOURCE_URL} is expected)")


def read_leaderboard(path: Path) -> Leaderboard:
    """The listed problems and kernels of a checkout; MalformedInput naming every fault found."""
    assets = assets_folder(path)
    data = _read_json(assets / "data.json")
    problems, kernels, errors = [], [], []
    for key, entries in data.items():
        try:
            problem = _read_problem(assets, str(key))
            problems.append(problem)
            kernels.extend(_read_entries(assets, problem, key, entries))
        except MalformedInput as exc:
            errors.append(str(exc))
    if errors:
        raise MalformedInput("; ".join(errors[:20]) + (f"; and {len(errors) - 20} more" if len(errors) > 20 else ""))
    seen: dict[tuple[int, int], str] = {}
    for problem in problems:
        if (problem.level, problem.number) in seen:
            raise MalformedInput(f"data.json: level {problem.level} problem {problem.number} is listed twice")
        seen[(problem.level, problem.number)] = problem.name
    return Leaderboard(problems, kernels)


def _read_json(path: Path) -> dict:
    try:
        data = json.loads(read_source(path))
    except json.JSONDecodeError as exc:
        raise MalformedInput(f"{path}:{exc.lineno}: not JSON: {exc.msg}") from None
    if not isinstance(data, dict):
        raise MalformedInput(f"{path}: must be an object keyed by 'Level <L>: <N>_<Name>'")
    return data


def _read_problem(assets: Path, key: str) -> ListedProblem:
    match = PROBLEM_KEY.match(key)
    if not match:
        raise MalformedInput(f"data.json: key {key[:60]!r} is not 'Level <L>: <N>_<Name>'")
    level, number, name = int(match[1]), int(match[2]), match[3]
    path = assets / "problems" / f"l{level}_p{number}.py"
    if not path.is_file():
        raise MalformedInput(f"data.json: key {key!r}: no problem file {path}")
    source = read_source(path)
    missing = missing_definitions(source, path)
    if missing:
        raise MalformedInput(f"{path}: does not define {', '.join(missing)}")
    return ListedProblem(level, number, name, source)


def _read_entries(assets: Path, problem: ListedProblem, key: str, entries) -> list[ListedKernel]:
    if not isinstance(entries, list):
        raise MalformedInput(f"data.json: {key!r} must be a list of kernels")
    kernels, models = [], set()
    for index, entry in enumerate(entries):
        where = f"data.json: {key!r} entry {index}"
        if not isinstance(entry, dict):
            raise MalformedInput(f"{where}: must be an object")
        model, speedup, file = entry.get("display_name"), entry.get("torch_speedup"), entry.get("file")
        if not isinstance(model, str) or not model.strip() or len(model) > MAX_NAME or not model.isprintable():
            raise MalformedInput(f"{where}: display_name must be a model name")
        if isinstance(speedup, bool) or not isinstance(speedup, (int, float)) or not math.isfinite(speedup):
            raise MalformedInput(f"{where}: torch_speedup must be a number, not {speedup!r}")
        if speedup <= 0:
            raise MalformedInput(f"{where}: torch_speedup {speedup} is not positive")
        if not isinstance(file, str) or not SOLUTION_FILE.match(file):
            raise MalformedInput(f"{where}: file must be a solution's name (letters, digits, - and _)")
        if model.strip().lower() in models:
            raise MalformedInput(f"{where}: a second kernel of {model!r} for this problem")
        models.add(model.strip().lower())
        path = assets / "solutions" / f"{file}.py"
        if not path.is_file():
            raise MalformedInput(f"{where}: no solution file {path}")
        kernels.append(ListedKernel(model.strip(), problem.level, problem.number, read_source(path), speedup, file))
    return kernels


# ---------------------------------------------------------------------------------------------
# comparing problem texts


def same_text(a: str, b: str) -> bool:
    """Whether two problem files say the same thing: equal once line endings and trailing spaces
    are set aside (a changed size, input or operation is a different problem)."""

    def normal(text: str) -> list[str]:
        return [line.rstrip() for line in text.replace("\r\n", "\n").strip().split("\n")]

    return normal(a) == normal(b)


def compare(problems: list[ListedProblem], other: ProblemSet | None) -> Comparison:
    comparison = Comparison(other)
    if other is None:
        return comparison
    theirs = {(p.level, p.number): p.source for p in Problem.objects.filter(problem_set=other)}
    for problem in problems:
        key = (problem.level, problem.number)
        if key not in theirs:
            comparison.absent.append(key)
        elif same_text(theirs[key], problem.source):
            comparison.matched.append(key)
        else:
            comparison.differing.append(key)
    return comparison


# ---------------------------------------------------------------------------------------------
# storing


def store_leaderboard(
    board: Leaderboard, hardware: Hardware, compare_with: ProblemSet | None, write: Callable[[str], None]
) -> LeaderboardImport:
    """Phases, in one transaction: _store_set (the leaderboard's problem set, its rules and the
    comparison), _store_problems (its texts), then per model store_run (its run and kernels) and
    _store_published (each kernel's published figure)."""
    comparison = compare(board.problems, compare_with)
    with transaction.atomic():
        problem_set = _store_set(comparison)
        problems = _store_problems(problem_set, board.problems)
        result = LeaderboardImport(problem_set, problems, [], comparison)
        for model in board.models:
            listed = [kernel for kernel in board.kernels if kernel.model == model]
            write(f"  {model}: {len(listed)} kernel(s)")
            run_import = store_run(_spec(model, hardware, problem_set, comparison), _bundle(listed))
            _mark_published(run_import.run)
            result.published += _store_published(run_import.run, listed)
            result.runs.append(run_import)
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
    would silently change the reference those kernels were judged against (MalformedInput)."""
    stored = {(p.level, p.number): p for p in Problem.objects.filter(problem_set=problem_set)}
    with_kernels = set(Kernel.objects.filter(problem__problem_set=problem_set).values_list("problem_id", flat=True))
    changed = [
        f"level {p.level} problem {p.number}"
        for p in problems
        if (p.level, p.number) in stored
        and stored[(p.level, p.number)].pk in with_kernels
        and not same_text(stored[(p.level, p.number)].source, p.source)
    ]
    if changed:
        raise MalformedInput(
            f"the leaderboard's text of {', '.join(changed[:10])} differs from the one stored, which has kernels: "
            "a stored reference never changes under its kernels (import into a fresh database, or delete those runs)"
        )
    report = ImportReport()
    for problem in problems:
        _, outcome = upsert(
            Problem,
            {"problem_set": problem_set, "level": problem.level, "number": problem.number},
            {"name": problem.name, "source": problem.source, "tags": guess_tags(problem.level, problem.name, problem.source)},
        )  # fmt: skip
        report.add(outcome)
    return report


def _spec(model: str, hardware: Hardware, problem_set: ProblemSet, comparison: Comparison) -> RunSpec:
    lab = next((lab for prefix, lab in LABS.items() if model.lower().startswith(prefix)), "")
    return RunSpec(
        model=model,
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
            KernelFile(f"solutions/{k.file}.py", k.level, k.number, 0, k.source) for k in kernels
        ]
    )


def _mark_published(run: Run) -> None:
    if run.published_source != PUBLISHED_SOURCE:
        Run.objects.filter(pk=run.pk).update(published_source=PUBLISHED_SOURCE)
        run.published_source = PUBLISHED_SOURCE


def _store_published(run: Run, listed: list[ListedKernel]) -> int:
    """Each kernel's published figure, in one bulk update of the kernels that differ; how many."""
    figures = {(k.level, k.number): k.published_speedup for k in listed}
    changed = []
    for kernel in Kernel.objects.filter(run=run, sample_index=0).select_related("problem"):
        figure = figures.get((kernel.problem.level, kernel.problem.number))
        if figure is not None and (kernel.published_speedup, kernel.published_hardware) != (figure, PUBLISHED_HARDWARE):
            kernel.published_speedup, kernel.published_hardware = figure, PUBLISHED_HARDWARE
            changed.append(kernel)
    Kernel.objects.bulk_update(changed, ["published_speedup", "published_hardware"], batch_size=500)
    if changed:  # the boards show published figures apart: their cached pages must be rebuilt
        board_store.mark_runs([run.pk])
    return len(changed)

