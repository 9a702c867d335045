"""Board rows: per run, the level's fast_p table, by each source: measured here, and published.

Pages, the API and exports all read rows from here, so they can never disagree. Every call
costs a fixed number of queries, whatever the number of runs or kernels.

Two sources give the same rows (the equivalence test holds them to it):

- `level_standings` reads the stored read model (leaderboard.boards): one row per run
  and level, kept current by the writes that change it. This is what pages and the API use.
- `live_level_standings` computes the same rows on the fly from kernels, their latest evaluations
  and their reviews: the reference implementation, used by tests and `rebuild_boards --verify`.

Both take the board's filters whole (`choices.BoardFilters`). A board's rows, made here or ranked
by the database (leaderboard.reads.board.ranked), are a `Standings`: a sequence of rows in rank
order with the board's leaders, read the same way whichever ranked them.

Which figure a row ranks by (`StandingRow.ranked_by`): a row with published figures (a run from a
published leaderboard) whose kernels are not all measured here yet ranks by its published fast_p,
labelled "published, <its GPU>": its measured 0% would only mean "not measured yet". Once every
kernel of the row is measured here it ranks by the measured figure, the published one beside it
with the difference. Every other row ranks by what was measured here.

The scoring rules (KernelBench's sample 0 by default, best-of-n as a labelled option, fast_0
independent of baselines) are in leaderboard.boards.scoring. Reviews shape the rows (rules in
leaderboard/reviews/services.py): a kernel whose latest verdict is reward hack or invalid is left
out, as if it had never been submitted (its problem still counts in the denominator), unless
`include_excluded=True` asks for the scores as they were before exclusions. Each row also counts
its flagged, unreviewed (in the review queue) and excluded kernels.
"""

from __future__ import annotations

from abc import abstractmethod
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from functools import cached_property

from evaluation.results.metrics import fast_p_curve
from leaderboard.boards import scoring
from leaderboard.boards import stored as board_stored
from leaderboard.boards.scoring import RULE_SAMPLE0, STANDARD_PS, KernelFacts, LevelScore
from leaderboard.models import Kernel, Run, RunQuerySet, RunScore
from leaderboard.reads.board.choices import BoardFilters, LevelBoard, picked_p
from leaderboard.reads.repeats import RowRepeats
from problems.models import ProblemSet

__all__ = [
    "STANDARD_PS",
    "ListedRows",
    "StandingRow",
    "Standings",
    "fast_p_curves",
    "level_standings",
    "live_level_standings",
    "standard_ps",
]

MEASURED = "measured"
PUBLISHED = "published"


@dataclass
class StandingRow:
    run: Run
    level: int | None  # None: all levels together
    score: LevelScore
    n_problems: int
    ps: tuple[float, ...] = STANDARD_PS  # the p's the summary holds
    rule: str = RULE_SAMPLE0
    p: float = 1.0  # the picked p: the row's headline figure and its rank
    # Set by `rank_rows`: the 95% bootstrap interval of fast_p at the ranking p, and whether it
    # overlaps the row above (a tie).
    interval: tuple[float, float] | None = None
    tied: bool = False
    extra: dict = field(default_factory=dict)
    # Set by the board's page for its shown rows: kernels measured twice here, and those that agree.
    repeats: RowRepeats | None = None

    @cached_property
    def summary(self) -> dict:
        """Every number of the row's columns (scoring.summary's keys), all from the one source the
        row ranks by: a row ranked by published figures shows published figures in every column,
        never a mix with the few kernels measured here so far. Computed when first read, so that
        ranking thousands of rows touches only the numbers it sorts by."""
        if self.ranked_by == PUBLISHED:
            return scoring.published_summary(self.score.published, self.n_problems, self.ps, self.rule)
        return scoring.summary(self.score, self.n_problems, self.ps, self.rule)

    @property
    def correct_rate(self) -> float:
        return self.tally.correct / self.n_problems

    @property
    def tally(self) -> scoring.Tally:
        """What was measured here, under the row's rule (the leaders' and the curves' source)."""
        return self.score.tally(self.rule)

    @property
    def unscored(self) -> int:
        """Correct kernels (under the row's rule, in the row's source) without a speedup."""
        return self.ranked_tally.unscored

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
        """fast_p at any p, measured here: a binary search in the stored sorted speedups."""
        return scoring.fast_p(self.tally, self.n_problems, p)

    # -- the published source, apart ---------------------------------------------------------

    @property
    def has_published(self) -> bool:
        return self.score.published.correct > 0

    @property
    def published_label(self) -> str:
        """How the row's published figures are labelled wherever shown: "published, L40S"."""
        where = self.score.published_on
        return f"published, {where}" if where else "published"

    @property
    def measured_kernels(self) -> int:
        """Kernels of the row measured here (board.store.measured_here counts the same, per run)."""
        return self.score.measured

    @property
    def verified(self) -> bool:
        """Every kernel of the row measured here (and it has some)."""
        return 0 < self.score.kernels <= self.score.measured

    def published_fast_p(self, p: float) -> float | None:
        """fast_p at p of the published figures, over the level's problems (unlisted ones failed)."""
        return scoring.fast_p(self.score.published, self.n_problems, p) if self.has_published else None

    @property
    def published_fast_1(self) -> float | None:
        """The published fast_1 (for pages that cannot pass p)."""
        return self.published_fast_p(1.0)

    @property
    def ranked_by(self) -> str:
        """PUBLISHED while a row with published figures is not yet all measured here, else MEASURED."""
        return PUBLISHED if self.has_published and not self.verified else MEASURED

    @property
    def measured_ranked(self) -> bool:
        """Ranked by what was measured here, with kernels measured here: a row that may lead the
        measured source (`leaders`) and that the overview's chart draws."""
        return self.ranked_by == MEASURED and self.measured_kernels > 0

    @property
    def ranked_tally(self) -> scoring.Tally:
        return self.score.published if self.ranked_by == PUBLISHED else self.tally

    @property
    def ranked_label(self) -> str:
        """What the row's headline figure is: "measured here, h200" or "published, L40S"."""
        if self.ranked_by == PUBLISHED:
            return self.published_label
        return f"measured here, {self.run.hardware.slug}"

    def rank_value(self, p: float) -> float:
        """The figure the row ranks by at p (see the module's docstring)."""
        return scoring.fast_p(self.ranked_tally, self.n_problems, p)

    def difference(self, p: float) -> float | None:
        """Measured minus published fast_p at p, in points of the level, over the problems measured
        here only: each figure of a problem compared with the same problem's other figure, so a row
        partly measured has its difference too (and a row wholly measured, fast_p minus published)."""
        if not self.has_published or not self.measured_kernels:
            return None
        return scoring.measured_minus_published(self.score.problems.values(), p, self.rule) / self.n_problems

    @property
    def compared_problems(self) -> int:
        """How many problems `difference` compares (those with a kernel measured here)."""
        return sum(1 for entry in self.score.problems.values() if entry[scoring.MEASURED])

    @property
    def ranked_hardware(self) -> str:
        """The hardware the headline figure was timed on: never h200 for figures timed on an L40S."""
        if self.ranked_by == PUBLISHED:
            return self.score.published_on or "published"
        return self.run.hardware.slug


def standard_ps(p: float | None) -> tuple[float, ...]:
    return STANDARD_PS if p is None or p in STANDARD_PS else (*STANDARD_PS, p)


def board_runs(filters: BoardFilters) -> RunQuerySet:
    """The runs the filters name: the board's rows, one per run."""
    runs = Run.objects.for_leaderboard(filters.problem_set, filters.hardware)
    if filters.setting:
        runs = runs.filter(setting=filters.setting)
    if filters.precision:  # part of a run's setting: fp32, fp16, bf16
        runs = runs.filter(precision=filters.precision)
    if filters.origin:
        runs = runs.filter(origin=filters.origin)
    return runs


def level_denominator(problem_set: ProblemSet | None, level: int | None) -> int:
    """The problems of the level in the set (0 without a set: a board with no rows)."""
    if problem_set is None:
        return 0
    counts = problem_set.problem_counts()
    return sum(counts.values()) if level is None else counts.get(level, 0)


def make_row(
    run: Run, level: int | None, score: LevelScore, n_problems: int, p: float | None, rule: str
) -> StandingRow:
    return StandingRow(run, level, score, n_problems, standard_ps(p), rule, picked_p(p))


def rank_rows(rows: list[StandingRow], p: float | None) -> list[StandingRow]:
    """Best fast_p at p (1.0 unless given) by the figure each row ranks by (measured, or published
    while not yet measured) first, then the correctness rate, then the oldest run; each row gets its
    bootstrap interval at that p and is marked tied where it overlaps the row above."""
    rank_p = picked_p(p)
    rows.sort(key=lambda row: (-row.rank_value(rank_p), -row.ranked_tally.correct, row.run.pk))
    annotate_intervals(rows, rank_p)
    return rows


def annotate_intervals(rows: list[StandingRow], p: float) -> None:
    """Each row's 95% interval of fast_p at p, and `tied` where it overlaps the row above."""
    for row in rows:
        row.interval = scoring.fast_p_interval(scoring.fast_p_count(row.ranked_tally, p), row.n_problems)
    for row, tied in zip(rows, scoring.mark_ties([row.interval for row in rows]), strict=True):
        row.tied = tied


def level_standings(filters: BoardFilters, *, runs: RunQuerySet | None = None) -> list[StandingRow]:
    """One row per run the filters name (`runs`: the runs to rank, when not those), scored on the
    filters' level (None = all levels), read from the stored read model. The denominator is every
    problem of the level in the set."""
    n_problems = level_denominator(filters.problem_set, filters.level)
    if n_problems == 0:
        return []
    runs = board_runs(filters) if runs is None else runs
    scores = board_stored.stored_scores(filters.problem_set, runs, filters.level, filters.include_excluded)
    rows = [make_row(run, filters.level, score, n_problems, filters.p, filters.rule) for run, score in scores]
    attach_compared_entries(rows, filters.level, filters.include_excluded)
    return rank_rows(rows, filters.p)


def attach_compared_entries(rows: list[StandingRow], level: int | None, include_excluded: bool) -> None:
    """The per-problem entries of the rows that compare measured with published figures (both
    present), in one query: `difference` compares each problem with itself, which the stored
    aggregates cannot. Boards without published figures measured here pay nothing."""
    compared = {row.run.pk: row for row in rows if row.has_published and row.measured_kernels}
    if not compared:
        return
    stored = RunScore.objects.filter(run_id__in=list(compared), with_excluded=include_excluded)
    stored = stored.exclude(level=board_stored.ALL_LEVELS) if level is None else stored.filter(level=level)
    for run_id, entries in stored.values_list("run_id", "problems"):
        compared[run_id].score.problems.update({int(pid): entry for pid, entry in entries.items()})


def board_rows(board: LevelBoard) -> list[StandingRow]:
    """A level page's rows: the runs' standings with the board's filters, sorted (a stable sort:
    ties keep the standings' order)."""
    return sort_rows(level_standings(board.filters), board.sort_key, board.descending, interval_p=board.filters.p)


def count_rows(filters: BoardFilters) -> int:
    """How many rows level_standings gives (one per run that passes the filters), in one count query."""
    if level_denominator(filters.problem_set, filters.level) == 0:
        return 0
    return board_runs(filters).count()


# ---------------------------------------------------------------------------------------------
# the reference: computed on the fly from kernels, evaluations and reviews


def live_level_standings(filters: BoardFilters) -> list[StandingRow]:
    """`level_standings`, computed from kernels and reviews on every call (the reference)."""
    n_problems = level_denominator(filters.problem_set, filters.level)
    if n_problems == 0:
        return []
    runs = list(board_runs(filters))
    level, include_excluded = filters.level, filters.include_excluded
    kernels = Kernel.objects.filter(run__in=runs)
    if level is not None:
        kernels = kernels.filter(problem__level=level)
    facts: dict[int, dict[int, list[KernelFacts]]] = defaultdict(lambda: defaultdict(list))
    for row in board_stored.kernel_rows(kernels) if runs else ():
        facts[row.run_id][row.level].append(row.facts)
    rows = [
        make_row(run, level, _live_score(facts[run.pk], level, include_excluded), n_problems, filters.p, filters.rule)
        for run in runs
    ]
    return rank_rows(rows, filters.p)


def _live_score(by_level: dict[int, list[KernelFacts]], level: int | None, include_excluded: bool) -> LevelScore:
    if level is None:
        return scoring.all_levels_score(by_level, include_excluded=include_excluded)
    return scoring.level_score(by_level[level], include_excluded=include_excluded)


def fast_p_curves(rows: list[StandingRow]) -> dict[int, list[tuple[float, float]]]:
    """fast_p over p for each row's run, on the metrics' default grid."""
    return {row.run.pk: fast_p_curve(row.speedups, row.n_problems) for row in rows}


# ---------------------------------------------------------------------------------------------
# sorting by a column


SORT_KEYS = {
    "model": lambda row: row.run.model.name.casefold(),
    "setting": lambda row: row.run.setting.casefold(),
    "hardware": lambda row: row.ranked_hardware,
    # Every column in the row's one source (measured here, or published while not yet measured).
    "compiled": lambda row: row.summary["compiled_rate"],
    "correct": lambda row: row.ranked_tally.correct,
    "geomean": lambda row: row.ranked_tally.geomean() or 0.0,
    "attempted": lambda row: row.summary["attempted"],
    "unscored": lambda row: row.unscored,
    # The labelled extra columns: reading them computes the row's full summary, only when sorted by them.
    "best_fast_1": lambda row: row.summary["best_fast_1"],
    "pass_at_1": lambda row: row.summary["pass_at_1"] or 0.0,
    # The published source's own columns (rows without published figures sort last either way).
    "published": lambda row: row.published_fast_p(row.p) if row.has_published else -1.0,
    "difference": lambda row: d if (d := row.difference(row.p)) is not None else -2.0,
}


def sort_rows(
    rows: list[StandingRow], sort: str, descending: bool, interval_p: float | None = None
) -> list[StandingRow]:
    """Rows sorted by a column: one of SORT_KEYS, or 'fast_<p>' (a key of the summary; the picked p's
    column, like every other, is in the source each row ranks by, measured or published). Each row's
    interval is that of fast_p at `interval_p` (the level page's picked p, whose column leads the
    board), else of the sorted fast_p (fast_1 for other columns); ties only mean something in the
    order of that same fast_p, so only there are rows marked tied with the row above."""
    p = _p_of(sort)
    if sort in SORT_KEYS:
        key = SORT_KEYS[sort]
    elif p is not None and rows and sort in rows[0].summary:

        def key(row: StandingRow) -> float:
            # a binary search: no row's full summary is computed to sort
            return row.rank_value(p)
    else:
        return rows
    rows = sorted(rows, key=key, reverse=descending)
    shown_p = interval_p if interval_p is not None else picked_p(p)
    annotate_intervals(rows, shown_p)
    if p != shown_p:
        for row in rows:
            row.tied = False
    return rows


def _p_of(key: str) -> float | None:
    try:
        return float(key.removeprefix("fast_")) if key.startswith("fast_") else None
    except ValueError:
        return None


# ---------------------------------------------------------------------------------------------
# who is best, by each source


@dataclass(frozen=True)
class Leaders:
    """The board's leader by each source at p: by what was measured here (rows ranked by their
    measured figures, with kernels measured here), and by published figures; each with its
    figures at p (for the page, which cannot pass p)."""

    measured: StandingRow | None
    published: StandingRow | None
    p: float = 1.0
    # Rows with some but not all kernels measured here (they rank by published figures), and their
    # kernels measured and in all: what the page says while no row is fully measured.
    partly: int = 0
    partly_measured: int = 0
    partly_kernels: int = 0

    @property
    def measured_value(self) -> float | None:
        return self.measured.fast_p(self.p) if self.measured else None

    @property
    def measured_published(self) -> float | None:
        return self.measured.published_fast_p(self.p) if self.measured else None

    @property
    def published_value(self) -> float | None:
        return self.published.published_fast_p(self.p) if self.published else None

    @property
    def published_measured(self) -> float | None:
        return self.published.fast_p(self.p) if self.published and self.published.verified else None


def leaders(rows: list[StandingRow], p: float) -> Leaders:
    measured = [row for row in rows if row.measured_ranked]
    published = [row for row in rows if row.has_published]
    partly = [row for row in rows if row.measured_kernels and not row.verified]
    return Leaders(
        max(measured, key=lambda row: (row.fast_p(p), row.tally.correct, -row.run.pk), default=None),
        max(published, key=lambda row: (row.published_fast_p(p) or 0.0, row.score.published.correct, -row.run.pk),
            default=None),
        p,
        len(partly),
        sum(row.measured_kernels for row in partly),
        sum(row.score.kernels for row in partly),
    )  # fmt: skip


# ---------------------------------------------------------------------------------------------
# a board's rows, however they are held


class Standings(Sequence[StandingRow]):
    """A board's rows in rank order, with its leaders: every row made and ranked in Python
    (`ListedRows`), or ranked by the database and made a slice at a time (`ranked.RankedRows`).
    Pages, downloads, the API and the overview read either the same way; a slice is a list."""

    @abstractmethod
    def leaders(self, p: float) -> Leaders:
        """`leaders` over every row of the board."""

    @property
    @abstractmethod
    def any_published(self) -> bool:
        """Whether any row of the board has published figures."""

    @abstractmethod
    def measured_rows(self) -> Standings:
        """The rows ranked by what was measured here, with kernels measured here (`leaders`' own)."""


class ListedRows(Standings):
    """A board's rows, every one made (`level_standings`, or `board_rows` in a column's order)."""

    def __init__(self, rows: list[StandingRow]) -> None:
        self.rows = rows

    def __len__(self) -> int:
        return len(self.rows)

    def __iter__(self) -> Iterator[StandingRow]:
        return iter(self.rows)

    def __getitem__(self, index):
        return self.rows[index]

    def leaders(self, p: float) -> Leaders:
        return leaders(self.rows, p)

    @property
    def any_published(self) -> bool:
        return any(row.has_published for row in self.rows)

    def measured_rows(self) -> ListedRows:
        return ListedRows([row for row in self.rows if row.measured_ranked])
