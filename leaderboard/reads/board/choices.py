"""A board's choices: its filters (`BoardFilters`: which runs, scored how), and one level page's
choices around them (`LevelBoard`: the sort, and what the filters are chosen from). What params.py
reads from a request and rows.py and ranked.py rank by: a module of its own, so that neither of
those needs the other's types."""

from __future__ import annotations

from dataclasses import dataclass

from evaluation.results.metrics import fast_p_key
from leaderboard.boards.scoring import RULE_SAMPLE0
from problems.models import Hardware, ProblemSet

# KernelBench's headline, fast_1: the p field's default, the board's first number and its order.
DEFAULT_PICKED_P = 1.0


def picked_p(p: float | None) -> float:
    """The p a board ranks by: the one asked for, else the headline's (p = 0 is a p asked for)."""
    return DEFAULT_PICKED_P if p is None else p


@dataclass(frozen=True)
class BoardFilters:
    """What selects a board's rows and scores them, the same for the level page, its downloads, the
    API's leaderboard and the overview: passed whole from the request to the rows, so that each
    layer reads the filters it needs and none spells them out again."""

    problem_set: ProblemSet | None  # None: no set exists yet (the board has no rows)
    level: int | None = None  # None: all levels together
    p: float | None = None  # the p the rows rank by; None: 1.0, KernelBench's headline
    hardware: Hardware | None = None
    setting: str | None = None
    origin: str | None = None
    precision: str | None = None  # fp32, fp16, bf16: part of a run's setting
    include_excluded: bool = False  # the scores before reviewers' exclusions
    rule: str = RULE_SAMPLE0  # best-of-n or KernelBench's sample-0 rule (scoring.RULES)

    @property
    def picked_p(self) -> float:
        return picked_p(self.p)


@dataclass(frozen=True)
class LevelBoard:
    """One level page's choices: its filters, the sort, and what the filters are chosen from."""

    filters: BoardFilters
    p_error: str
    problem_sets: list[ProblemSet]  # each with .level_counts and .total
    hardware_list: list[Hardware]
    sort: str  # the column the query asks to sort by; "" for the default (`sort_key`)
    descending: bool
    set_named: bool = False  # the query named the set (else it is the featured one)

    @property
    def sort_key(self) -> str:
        """The column the rows are sorted by: the one asked for, else the picked p's fast_p (the
        headline column)."""
        return self.sort or fast_p_key(self.filters.picked_p)

    @property
    def level(self) -> str:
        """The level as its URL names it (one of params.LEVEL_SLUGS)."""
        return "all" if self.filters.level is None else str(self.filters.level)

    @property
    def label(self) -> str:
        return "all levels" if self.filters.level is None else f"level {self.filters.level}"

    @property
    def n_problems(self) -> int:
        """The denominator of fast_p: the problems of the level in the set."""
        problem_set = self.filters.problem_set
        if problem_set is None:
            return 0
        if self.filters.level is None:
            return problem_set.total
        return problem_set.level_counts[self.filters.level]
