"""Leaderboard rows: per run, the level's fast_p table.

Pages, the API and exports all read standings from here, so they can never disagree. Every call
costs a fixed number of queries, whatever the number of runs or kernels.

Two sources give the same rows (the equivalence test holds them to it):

- `level_standings` reads the stored read model (leaderboard.reads.board_store): one row per run
  and level, kept current by the writes that change it. This is what pages and the API use.
- `live_level_standings` computes the same rows on the fly from kernels, their latest evaluations
  and their reviews: the reference implementation, used by tests and `rebuild_boards --verify`.

The scoring rules (KernelBench's sample 0 by default, best-of-n as a labelled option, fast_0
independent of baselines) are in leaderboard.reads.scoring. Reviews shape the rows (rules in
leaderboard/reviews/services.py): a kernel whose latest verdict is reward hack or invalid is left
out, as if it had never been submitted (its problem still counts in the denominator), unless
`include_excluded=True` asks for the scores as they were before exclusions. Each row also counts
its flagged, unreviewed (in the review queue) and excluded kernels.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from functools import cached_property

from evaluation.metrics import fast_p_curve
from leaderboard.models import Kernel, Run, RunQuerySet
from leaderboard.reads import board_store, scoring
from leaderboard.reads.scoring import RULE_SAMPLE0, STANDARD_PS, KernelFacts, LevelScore
from problems.models import Hardware, ProblemSet

__all__ = ["STANDARD_PS", "StandingRow", "fast_p_curves", "level_standings", "live_level_standings", "standard_ps"]


@dataclass
class StandingRow:
    run: Run
    level: int | None  # None: all levels together
    score: LevelScore
    n_problems: int
    ps: tuple[float, ...] = STANDARD_PS  # the p's the summary holds
    rule: str = RULE_SAMPLE0
    # Set by `rank_rows`: the 95% bootstrap interval of fast_p at the ranking p, and whether it
    # overlaps the row above (a tie).
    interval: tuple[float, float] | None = None
    tied: bool = False
    extra: dict = field(default_factory=dict)

    @cached_property
    def summary(self) -> dict:
        """Every number of the row (scoring.summary's keys); computed when first read, so that
        ranking thousands of rows touches only the numbers it sorts by."""
        return scoring.summary(self.score, self.n_problems, self.ps, self.rule)

    @property
    def correct_rate(self) -> float:
        return self.tally.correct / self.n_problems

    @property
    def tally(self) -> scoring.Tally:
        return self.score.tally(self.rule)

    @property
    def unscored(self) -> int:
        """Correct kernels (under the row's rule) without a speedup: correct, never faster."""
        return self.tally.unscored

    @property
    def flagged(self) -> int:
        return self.score.flagged

    @property
    def unreviewed(self) -> int:
        return self.score.unreviewed

    @property
    def excluded(self) -> int:
        return self.score.excluded

    @property
    def speedups(self) -> list[float]:
        """The sorted speedups of the row's scored problems (under the row's rule)."""
        return list(self.tally.speedups)

    def fast_p(self, p: float) -> float:
        """fast_p at any p: a binary search in the stored sorted speedups."""
        return scoring.fast_p(self.tally, self.n_problems, p)


def standard_ps(p: float | None) -> tuple[float, ...]:
    return STANDARD_PS if p is None or p in STANDARD_PS else (*STANDARD_PS, p)


def _runs(
    problem_set: ProblemSet,
    hardware: Hardware | None,
    setting: str | None,
    origin: str | None,
    precision: str | None = None,
) -> RunQuerySet:
    runs = Run.objects.for_leaderboard(problem_set, hardware)
    if setting:
        runs = runs.filter(setting=setting)
    if precision:  # part of a run's setting: fp32, fp16, bf16
        runs = runs.filter(precision=precision)
    if origin:
        runs = runs.filter(origin=origin)
    return runs


def level_denominator(problem_set: ProblemSet, level: int | None) -> int:
    counts = problem_set.problem_counts()
    return sum(counts.values()) if level is None else counts.get(level, 0)


def make_row(
    run: Run, level: int | None, score: LevelScore, n_problems: int, p: float | None, rule: str
) -> StandingRow:
    return StandingRow(run, level, score, n_problems, standard_ps(p), rule)


def rank_rows(rows: list[StandingRow], p: float | None) -> list[StandingRow]:
    """Best fast_p at p (1.0 unless given) first, then the correctness rate, then the oldest run;
    each row gets its bootstrap interval at that p and is marked tied where it overlaps the row above."""
    rank_p = 1.0 if p is None else p
    rows.sort(key=lambda row: (-row.fast_p(rank_p), -row.correct_rate, row.run.pk))
    annotate_intervals(rows, rank_p)
    return rows


def annotate_intervals(rows: list[StandingRow], p: float) -> None:
    """Each row's 95% interval of fast_p at p, and `tied` where it overlaps the row above."""
    for row in rows:
        row.interval = scoring.fast_p_interval(scoring.fast_p_count(row.tally, p), row.n_problems)
    for row, tied in zip(rows, scoring.mark_ties([row.interval for row in rows]), strict=True):
        row.tied = tied


def level_standings(
    problem_set: ProblemSet,
    level: int | None,
    *,
    p: float | None = None,
    hardware: Hardware | None = None,
    setting: str | None = None,
    origin: str | None = None,
    include_excluded: bool = False,
    rule: str = RULE_SAMPLE0,
    precision: str | None = None,
) -> list[StandingRow]:
    """One row per run of `problem_set` (filtered), scored on `level` (None = all levels), read
    from the stored read model. The denominator is every problem of the level in the set."""
    runs = _runs(problem_set, hardware, setting, origin, precision)
    n_problems = level_denominator(problem_set, level)
    if n_problems == 0:
        return []
    scores = board_store.stored_scores(problem_set, runs, level, include_excluded)
    rows = [make_row(run, level, score, n_problems, p, rule) for run, score in scores]
    return rank_rows(rows, p)


# ---------------------------------------------------------------------------------------------
# the reference: computed on the fly from kernels, evaluations and reviews


def live_level_standings(
    problem_set: ProblemSet,
    level: int | None,
    *,
    p: float | None = None,
    hardware: Hardware | None = None,
    setting: str | None = None,
    origin: str | None = None,
    include_excluded: bool = False,
    rule: str = RULE_SAMPLE0,
    precision: str | None = None,
) -> list[StandingRow]:
    """`level_standings`, computed from kernels and reviews on every call (the reference)."""
    runs = list(_runs(problem_set, hardware, setting, origin, precision))
    n_problems = level_denominator(problem_set, level)
    if n_problems == 0:
        return []
    kernels = Kernel.objects.filter(run__in=runs)
    if level is not None:
        kernels = kernels.filter(problem__level=level)
    facts: dict[int, list[KernelFacts]] = defaultdict(list)
    for row in board_store.kernel_rows(kernels) if runs else ():
        facts[row.run_id].append(row.facts)
    rows = [
        make_row(run, level, scoring.level_score(facts[run.pk], include_excluded=include_excluded), n_problems, p, rule)
        for run in runs
    ]
    return rank_rows(rows, p)


def fast_p_curves(rows: list[StandingRow]) -> dict[int, list[tuple[float, float]]]:
    """fast_p over p for each row's run, on the metrics' default grid."""
    return {row.run.pk: fast_p_curve(row.speedups, row.n_problems) for row in rows}
