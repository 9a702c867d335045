"""What a run's page and its API show: every problem with its samples, the verification progress,
the run's scores per level, and a comparison with another run.

Every function costs a fixed number of queries, whatever the size of the run.

Scores are the boards' (leaderboard.boards.scoring: KernelBench's rules, `src/kernelbench/score.py`):
only sample 0 of each problem counts; the denominator is every problem of the level in the set;
correctness (fast_0) does not depend on baselines, so a correct kernel without a speedup (imported
with no baseline on the run's hardware) counts as correct and as unscored for fast_p at p > 0.
Best-of-n (the best correct sample per problem) is given beside it, labelled, for runs with several
samples. Kernels a reviewer excluded (reward hack, invalid) are left out, as on the leaderboard.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

from django.db.models import Count, F, OuterRef, QuerySet, Subquery
from django.utils.safestring import SafeString

from evaluation.results.metrics import DEFAULT_PS, fast_p_curve, fast_p_key
from leaderboard.boards import scoring
from leaderboard.boards.scoring import KernelFacts
from leaderboard.models import Evaluation, Kernel, Origin, Run
from leaderboard.reads.options import select_options

RUN_PS: tuple[float, ...] = (0.0, *DEFAULT_PS)
# A status's label by a dict lookup: the enum's own lookup, per cell, was a fifth of the page's cells.
STATUS_LABELS: dict[str, str] = dict(Evaluation.Status.choices)
COMPARABLE_RUNS = 200  # runs offered in the "compare with" list


# ---------------------------------------------------------------------------------------------
# the run's kernels


@dataclass
class Sample:
    """One kernel of the run as the page shows it: its latest finished evaluation (the one that
    counts), and the state of its newest evaluation when that one is still pending or failed."""

    kernel_id: int
    sample: int
    backend: str
    status: str  # the latest finished evaluation's status; "" when none
    compiled: bool
    correct: bool
    speedup: float | None
    origin: str  # of the latest finished evaluation
    flags: list[str]
    excluded: bool
    pending: str  # "queued", "running", "failed" or "" (the newest evaluation's state when not done)
    source_hash: str = ""
    speedup_low: float | None = None  # the speedup's 95% interval
    speedup_high: float | None = None

    @property
    def unscored(self) -> bool:
        return self.correct and self.speedup is None

    @property
    def status_label(self) -> str:
        return STATUS_LABELS.get(self.status, self.status)

    @property
    def counts_correct(self) -> bool:
        return self.correct and not self.excluded

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class ProblemLine:
    problem_id: int
    level: int
    number: int
    name: str
    samples: list[Sample] = field(default_factory=list)

    @property
    def first(self) -> Sample | None:
        """Sample 0: the one KernelBench scores."""
        return next((s for s in self.samples if s.sample == 0), None)

    @property
    def best(self) -> Sample | None:
        """The fastest correct sample that counts (best-of-n), else None."""
        correct = [s for s in self.samples if s.counts_correct]
        return max(correct, key=lambda s: s.speedup or 0.0) if correct else None

    def as_dict(self) -> dict[str, Any]:
        return {
            "problem_id": self.problem_id,
            "level": self.level,
            "number": self.number,
            "name": self.name,
            "samples": [sample.as_dict() for sample in self.samples],
        }


def run_for_page(pk: int) -> QuerySet[Run]:
    return Run.objects.filter(pk=pk).select_related(
        "model__lab", "hardware", "problem_set__rules", "rules", "created_by"
    )


def _newest(field_name: str) -> Subquery:
    newest = Evaluation.objects.filter(kernel=OuterRef("pk")).order_by("-queued_at", "-pk")
    return Subquery(newest.values(field_name)[:1])


def _sample_rows(run: Run):
    """One query: every kernel of the run with what its cell shows (no sources, no logs). Whether a
    reviewer excluded it is its stored review state, as the boards read it (a verdict stores it in its
    own transaction): the review rules' expressions cost about 6 ms to build and compile a page."""
    return (
        Kernel.objects.filter(run=run)
        .annotate(is_excluded=F("review_excluded"), newest_state=_newest("state"))
        .order_by("problem__level", "problem__number", "sample_index", "pk")
        .values_list(
            "pk",
            "sample_index",
            "backend",
            "problem_id",
            "problem__level",
            "problem__number",
            "problem__name",
            "latest_evaluation__status",
            "latest_evaluation__compiled",
            "latest_evaluation__correct",
            "latest_evaluation__speedup",
            "latest_evaluation__origin",
            "latest_evaluation__flags",
            "is_excluded",
            "newest_state",
            "source_hash",
            "latest_evaluation__speedup_low",
            "latest_evaluation__speedup_high",
        )
    )


def run_problems(run: Run) -> list[ProblemLine]:
    """The run's problems in order (level, number), each with its samples."""
    lines: dict[int, ProblemLine] = {}
    for row in _sample_rows(run):
        (pk, sample, backend, problem_id, level, number, name, status, compiled, correct, speedup, origin, flags) = row[
            :13
        ]
        excluded, newest_state, source_hash, low, high = row[13:18]
        line = lines.setdefault(problem_id, ProblemLine(problem_id, level, number, name))
        pending = newest_state if newest_state and newest_state != Evaluation.State.DONE else ""
        codes = [flag.get("code", "") for flag in flags or [] if isinstance(flag, dict)]
        line.samples.append(
            Sample(
                pk, sample, backend, status or "", bool(compiled) or bool(correct), bool(correct), speedup,
                origin or "", codes, bool(excluded), pending, source_hash or "", low, high,
            )
        )  # fmt: skip
    return list(lines.values())


# ---------------------------------------------------------------------------------------------
# verification progress


@dataclass(frozen=True)
class RunProgress:
    """Where the run's kernels stand, by the state of each kernel's newest evaluation (each count
    is of kernels), and, apart, its evaluations measured here by state (counts of evaluations: a
    kernel evaluated twice counts once above and twice there).

    A re-verification queues a new evaluation of kernels already measured here: their newest
    evaluation is pending, but their earlier result still stands (it is the one the boards count
    until the new one finishes), so the label says how far the re-measuring is and that the earlier
    results are shown meanwhile, never that nothing is evaluated."""

    total: int
    evaluated: int  # newest evaluation done here (measured)
    imported: int  # newest evaluation is an imported result, not verified here
    demo: int  # newest evaluation is synthetic demo data (seed_demo)
    queued: int
    running: int
    failed: int  # the infrastructure gave up (no verdict)
    not_evaluated: int
    settled: int = 0  # latest finished evaluation measured here, whatever is newer
    remeasuring: int = 0  # of those, newest evaluation queued or running (being re-verified)
    evaluations: dict[str, int] = field(default_factory=dict)  # measured evaluations by state

    @property
    def pending(self) -> int:
        return self.queued + self.running

    @property
    def label(self) -> str:
        if self.remeasuring:
            parts = [f"re-verifying: {self.evaluated} of {self.total} kernels re-measured"]
        else:
            parts = [f"{self.evaluated} of {self.total} kernels evaluated"]
        parts += [f"{n} {word}" for n, word in ((self.running, "running"), (self.queued, "queued")) if n]
        parts += [f"{self.failed} failed"] if self.failed else []
        parts += [f"{self.imported} imported, unverified"] if self.imported else []
        parts += [f"{self.demo} demo data (synthetic)"] if self.demo else []
        parts += [f"{self.not_evaluated} not evaluated"] if self.not_evaluated else []
        earlier = f"; previous results shown meanwhile ({self.settled} of {self.total} kernels evaluated)"
        return ", ".join(parts) + (earlier if self.remeasuring else "")

    @property
    def percent_done(self) -> float:
        finished = self.evaluated + self.failed
        return 100.0 * finished / self.total if self.total else 100.0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self) | {"pending": self.pending, "label": self.label, "done": self.pending == 0}


def run_progress(run: Run) -> RunProgress:
    """Two queries: the newest evaluation's state and origin of every kernel of the run with the
    origin of its latest finished one, and the run's measured evaluations by state."""
    rows = (
        Kernel.objects.filter(run=run)
        .annotate(newest_state=_newest("state"), newest_origin=_newest("origin"))
        .order_by()
        .values_list("newest_state", "newest_origin", "latest_evaluation__origin")
    )
    counts: Counter[str] = Counter()
    for state, origin, settled in rows:
        if settled == Origin.MEASURED:
            counts["settled"] += 1
            counts["remeasuring"] += state in Evaluation.PENDING_STATES
        if state is None:
            counts["not_evaluated"] += 1
        elif state == Evaluation.State.DONE:
            counts[{Origin.MEASURED: "evaluated", Origin.DEMO: "demo"}.get(origin, "imported")] += 1
        else:
            counts[state] += 1
        counts["total"] += 1
    names = (
        "total",
        "evaluated",
        "imported",
        "demo",
        "queued",
        "running",
        "failed",
        "not_evaluated",
        "settled",
        "remeasuring",
    )
    return RunProgress(**{name: counts[name] for name in names}, evaluations=_evaluation_counts(run))


def _evaluation_counts(run: Run) -> dict[str, int]:
    """The run's evaluations measured here, counted by state (one query)."""
    states = (
        Evaluation.objects.filter(kernel__run=run, origin=Origin.MEASURED)
        .order_by()
        .values_list("state")
        .annotate(n=Count("pk"))
    )
    counts = dict.fromkeys(Evaluation.State.values, 0)
    counts.update(dict(states))
    return counts


# ---------------------------------------------------------------------------------------------
# scores


@dataclass
class LevelScore:
    """A run's scores on one level, by KernelBench's rule (sample 0) and by best-of-n."""

    level: int
    n_problems: int
    attempted: int
    compiled_rate: float
    correct_rate: float  # sample 0, whatever the baselines
    fast_p: dict[str, float]  # sample 0; fast_0 equals correct_rate
    geomean_speedup: float | None  # sample 0, over correct kernels with a speedup
    unscored: int  # sample-0 kernels correct without a speedup
    best_of_n: dict[str, float] | None  # best correct sample per problem; None with one sample
    curve: list[tuple[float, float]]
    curve_best: list[tuple[float, float]] | None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _facts(lines: list[ProblemLine]) -> list[KernelFacts]:
    return [
        KernelFacts(line.problem_id, s.sample, s.compiled, s.correct, s.speedup, excluded=s.excluded)
        for line in lines
        for s in line.samples
    ]


def _pick(summary: dict[str, Any], prefix: str) -> dict[str, float]:
    return {fast_p_key(p): summary[prefix + fast_p_key(p)] for p in RUN_PS}


def level_score(level: int, lines: list[ProblemLine], n_problems: int) -> LevelScore:
    """Scores of `lines` (the run's problems of `level`) against the level's `n_problems`, by the
    boards' own rules (leaderboard.boards.scoring), so the run page and the boards always agree."""
    n_problems = max(n_problems, len(lines), 1)
    score = scoring.level_score(_facts(lines))
    summary = scoring.summary(score, n_problems, DEFAULT_PS)
    several = any(len(line.samples) > 1 for line in lines)
    return LevelScore(
        level=level,
        n_problems=n_problems,
        attempted=summary["attempted"],
        compiled_rate=summary["compiled_rate"],
        correct_rate=summary["correct_rate"],
        fast_p=_pick(summary, ""),
        geomean_speedup=summary["geomean_speedup"],
        unscored=summary["unscored"],
        best_of_n=_pick(summary, "best_") if several else None,
        curve=fast_p_curve(list(score.sample0.speedups), n_problems),
        curve_best=fast_p_curve(list(score.best.speedups), n_problems) if several else None,
    )


def run_scores(run: Run, lines: list[ProblemLine]) -> list[LevelScore]:
    """One LevelScore per level the run has kernels in (one query for the denominators)."""
    counts = run.problem_set.problem_counts()
    by_level: dict[int, list[ProblemLine]] = defaultdict(list)
    for line in lines:
        by_level[line.level].append(line)
    return [level_score(level, by_level[level], counts.get(level, 0)) for level in sorted(by_level)]


# ---------------------------------------------------------------------------------------------
# comparison


@dataclass(frozen=True)
class CompareLine:
    level: int
    number: int
    name: str
    left: Sample | None
    right: Sample | None

    @property
    def verdict(self) -> str:
        """Where one run is correct and the other is not; '' when both agree."""
        left = bool(self.left and self.left.counts_correct)
        right = bool(self.right and self.right.counts_correct)
        if left == right:
            return ""
        return "only left correct" if left else "only right correct"

    @property
    def ratio(self) -> float | None:
        """Left speedup / right speedup, when both have one."""
        a = self.left.speedup if self.left and self.left.counts_correct else None
        b = self.right.speedup if self.right and self.right.counts_correct else None
        return a / b if a and b else None

    @property
    def same_source(self) -> bool:
        """Both runs hold the very same kernel: any difference in speed is the machine's noise."""
        return bool(
            self.left and self.right and self.left.source_hash and self.left.source_hash == self.right.source_hash
        )

    @property
    def faster(self) -> str:
        """ "left" or "right" when that side is faster beyond noise: different sources, both correct,
        and the two speedups' 95% intervals apart (without intervals, the speedups); "" otherwise."""
        if self.ratio is None or self.same_source:
            return ""
        left, right = self.left, self.right
        assert left is not None and right is not None  # a ratio needs both
        if left.speedup_low is not None and right.speedup_high is not None and left.speedup_low > right.speedup_high:
            return "left"
        if right.speedup_low is not None and left.speedup_high is not None and right.speedup_low > left.speedup_high:
            return "right"
        if None in (left.speedup_low, left.speedup_high, right.speedup_low, right.speedup_high):
            return "left" if self.ratio > 1 else "right" if self.ratio < 1 else ""
        return ""

    def as_dict(self) -> dict[str, Any]:
        return {
            "level": self.level,
            "number": self.number,
            "name": self.name,
            "left": self.left.as_dict() if self.left else None,
            "right": self.right.as_dict() if self.right else None,
            "verdict": self.verdict,
            "ratio": self.ratio,
            "faster": self.faster,
            "same_source": self.same_source,
        }


def compare(left: Iterable[ProblemLine], right: Iterable[ProblemLine]) -> list[CompareLine]:
    """Sample 0 of each problem of either run, side by side, by (level, number)."""
    a = {(line.level, line.number): line for line in left}
    b = {(line.level, line.number): line for line in right}
    keys = sorted(set(a) | set(b))
    out = []
    for key in keys:
        line = a.get(key) or b[key]
        out.append(
            CompareLine(
                key[0], key[1], line.name, a[key].first if key in a else None, b[key].first if key in b else None
            )
        )
    return out


def compare_summary(lines: list[CompareLine]) -> dict[str, int]:
    verdicts = Counter(line.verdict for line in lines)
    faster = Counter(line.faster for line in lines)
    return {
        "problems": len(lines),
        "only_left_correct": verdicts["only left correct"],
        "only_right_correct": verdicts["only right correct"],
        "left_faster": faster["left"],
        "right_faster": faster["right"],
        "same_source": sum(line.same_source for line in lines),
    }


def comparable_runs(run: Run, other: Run | None) -> SafeString:
    """The "compare with" list: other runs of the same problem set, newest first (run_set_newest_idx),
    `other` marked; empty when there is none."""
    others = Run.objects.filter(problem_set_id=run.problem_set_id).exclude(pk=run.pk).order_by("-created_at", "-pk")
    rows = others.values_list("pk", "model__name", "setting", "hardware__slug")[:COMPARABLE_RUNS]
    labels = ((pk, f"run {pk} · {model} · {setting} · {hardware}") for pk, model, setting, hardware in rows)
    return select_options(labels, other.pk if other else None)
