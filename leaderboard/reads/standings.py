"""Leaderboard rows: per run, the level's fast_p table computed by the shared metrics.

Pages, the API and exports all read standings from here, so they can never disagree. Every call
costs a fixed number of queries, whatever the number of runs or kernels.

Reviews shape the rows (rules in leaderboard/reviews.py): a kernel whose latest verdict is reward
hack or invalid is left out, as if it had never been submitted (its problem still counts in the
denominator, and another sample of the problem may still count), unless `include_excluded=True`
asks for the scores as they were before exclusions. Each row also counts its flagged, unreviewed
(in the review queue) and excluded kernels.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from evaluation.metrics import DEFAULT_PS, ProblemResult, fast_p_curve, fast_p_key, level_summary
from leaderboard.models import Kernel, Run
from problems.models import Hardware, ProblemSet

STANDARD_PS: tuple[float, ...] = tuple(DEFAULT_PS)


@dataclass
class StandingRow:
    run: Run
    level: int | None  # None: all levels together
    summary: dict
    # Correct kernels whose speedup is unknown (imported without a baseline): not counted as correct.
    unscored: int = 0
    speedups: dict[int, float | None] = field(default_factory=dict)  # problem id -> best speedup
    # Review state of the run's kernels (of the level): see leaderboard/reviews.py for the rules.
    flagged: int = 0
    unreviewed: int = 0
    excluded: int = 0

    def fast_p(self, p: float) -> float:
        return self.summary[fast_p_key(p)]


def standard_ps(p: float | None) -> tuple[float, ...]:
    return STANDARD_PS if p is None or p in STANDARD_PS else (*STANDARD_PS, p)


def _kernel_rows(runs: list[Run], level: int | None):
    kernels = Kernel.objects.filter(run__in=runs)
    if level is not None:
        kernels = kernels.filter(problem__level=level)
    return kernels.with_review_state().values_list(
        "run_id",
        "problem_id",
        "latest_evaluation__compiled",
        "latest_evaluation__correct",
        "latest_evaluation__speedup",
        "is_flagged",
        "needs_review",
        "is_excluded",
    )


def level_standings(
    problem_set: ProblemSet,
    level: int | None,
    *,
    p: float | None = None,
    hardware: Hardware | None = None,
    setting: str | None = None,
    origin: str | None = None,
    include_excluded: bool = False,
) -> list[StandingRow]:
    """One row per run of `problem_set` (filtered), scored on `level` (None = all levels).

    A kernel counts by its latest evaluation; with several samples per problem the best correct
    one counts (level_summary's rule). The denominator is every problem of the level in the set.
    Kernels excluded by a reviewer's verdict count only with `include_excluded=True`.
    """
    runs = Run.objects.for_leaderboard(problem_set, hardware)
    if setting:
        runs = runs.filter(setting=setting)
    if origin:
        runs = runs.filter(origin=origin)
    runs = list(runs)
    counts = problem_set.problem_counts()
    n_problems = sum(counts.values()) if level is None else counts.get(level, 0)
    results: dict[int, list[ProblemResult]] = defaultdict(list)
    unscored: dict[int, int] = defaultdict(int)
    review_counts: dict[int, list[int]] = defaultdict(lambda: [0, 0, 0])  # flagged, unreviewed, excluded
    for run_id, problem_id, compiled, correct, speedup, flagged, unreviewed, excluded in (
        _kernel_rows(runs, level) if runs else ()
    ):
        counts_of_run = review_counts[run_id]
        counts_of_run[0] += bool(flagged)
        counts_of_run[1] += bool(unreviewed)
        counts_of_run[2] += bool(excluded)
        if excluded and not include_excluded:
            continue
        scored = bool(correct) and speedup is not None
        if correct and speedup is None:
            unscored[run_id] += 1
        # A kernel that ran correctly did compile, whatever an imported record says.
        results[run_id].append(ProblemResult(problem_id, bool(compiled) or scored, scored, speedup if scored else None))
    if n_problems == 0:
        return []
    rows = []
    for run in runs:
        run_results = results.get(run.pk, [])
        summary = level_summary(run_results, n_problems, ps=standard_ps(p))
        best = {r.problem: r.speedup for r in run_results if r.correct}
        flagged, unreviewed, excluded = review_counts[run.pk]
        rows.append(StandingRow(run, level, summary, unscored[run.pk], best, flagged, unreviewed, excluded))
    rows.sort(key=lambda row: (-row.fast_p(p if p is not None else 1.0), -row.summary["correct_rate"], row.run.pk))
    return rows


def fast_p_curves(rows: list[StandingRow]) -> dict[int, list[tuple[float, float]]]:
    """fast_p over p for each row's run, on the metrics' default grid."""
    return {row.run.pk: fast_p_curve(row.speedups, row.summary["n_problems"]) for row in rows}
