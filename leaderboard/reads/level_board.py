"""What the level page (leaderboard.views.level_board) shows: the visitor's choices read from the
query string, and the standings they select, sorted. The table's columns and its CSV and JSON
downloads are in leaderboard.reads.level_table."""

from __future__ import annotations

import math
from dataclasses import dataclass

from django.http import QueryDict

from evaluation.metrics import fast_p_key
from leaderboard.models import Origin, Precision
from leaderboard.reads import queries
from leaderboard.reads.scoring import RULE_SAMPLE0, RULES
from leaderboard.reads.standings import StandingRow, level_standings
from problems.models import LEVELS, Hardware, ProblemSet, named_by

LEVEL_SLUGS = ("all", *(str(level) for level in LEVELS))  # what /levels/<level>/ accepts
# KernelBench's headline, fast_1: the p field's default, the board's first number and its order.
DEFAULT_PICKED_P = 1.0
MAX_P = 1000.0


def parse_p(text: str | None) -> tuple[float | None, str]:
    """The picked p, and what was wrong with the text asked for ('' when nothing was)."""
    if text is None or text.strip() == "":
        return DEFAULT_PICKED_P, ""
    try:
        p = float(text)
    except ValueError:
        return DEFAULT_PICKED_P, f"p must be a number; showing p = {DEFAULT_PICKED_P:g}."
    if not math.isfinite(p) or p < 0 or p > MAX_P:
        return DEFAULT_PICKED_P, f"p must lie between 0 and {MAX_P:g}; showing p = {DEFAULT_PICKED_P:g}."
    return p, ""


@dataclass
class LevelBoard:
    """One level page's choices: the level, the picked p, the filters and the sort."""

    level: str  # one of LEVEL_SLUGS
    p: float | None
    p_error: str
    problem_sets: list[ProblemSet]  # each with .level_counts and .total
    problem_set: ProblemSet | None
    hardware_list: list[Hardware]
    hardware: Hardware | None
    setting: str | None
    origin: str | None
    precision: str | None  # fp32, fp16, bf16: part of a run's setting
    include_excluded: bool  # ?exclusions=include: the scores before reviewers' exclusions
    rule: str  # ?rule=best: best-of-n; KernelBench's sample-0 rule otherwise (scoring.RULES)
    sort: str
    descending: bool

    @property
    def level_number(self) -> int | None:
        return None if self.level == "all" else int(self.level)

    @property
    def label(self) -> str:
        return "all levels" if self.level_number is None else f"level {self.level_number}"

    @property
    def n_problems(self) -> int:
        """The denominator of fast_p: the problems of the level in the set."""
        if self.problem_set is None:
            return 0
        if self.level_number is None:
            return self.problem_set.total
        return self.problem_set.level_counts[self.level_number]

    def rows(self) -> list[StandingRow]:
        """The runs' standings with these filters, sorted (a stable sort: ties keep the standings' order)."""
        rows: list[StandingRow] = []
        if self.problem_set is not None:
            rows = level_standings(
                self.problem_set,
                self.level_number,
                p=self.p,
                hardware=self.hardware,
                setting=self.setting,
                origin=self.origin,
                include_excluded=self.include_excluded,
                precision=self.precision,
                rule=self.rule,
            )
        return queries.sort_rows(rows, self.sort, self.descending, interval_p=self.p)


def read_level_board(level: str, params: QueryDict) -> LevelBoard:
    """The page's choices from its query string; anything unknown falls back to the default (the
    set shown first, any hardware, any origin)."""
    p, p_error = parse_p(params.get("p"))
    problem_sets = queries.problem_sets_with_counts()
    problem_set = named_by(problem_sets, params.get("set", ""), ProblemSet.SLUG_LENGTH)
    if problem_set is None:
        featured = queries.featured_problem_set()
        problem_set = next((s for s in problem_sets if featured and s.pk == featured.pk), None)
    hardware_list = queries.hardware_list()
    return LevelBoard(
        level=level,
        p=p,
        p_error=p_error,
        problem_sets=problem_sets,
        problem_set=problem_set,
        hardware_list=hardware_list,
        hardware=named_by(hardware_list, params.get("hardware", ""), Hardware.SLUG_LENGTH),
        setting=params.get("setting") or None,
        origin=params.get("origin") if params.get("origin") in Origin.values else None,
        precision=params.get("precision") if params.get("precision") in Precision.values else None,
        include_excluded=params.get("exclusions") == "include",
        rule=params.get("rule") if params.get("rule") in RULES else RULE_SAMPLE0,
        # Ranked by the picked p's fast_p (the headline column) unless the visitor sorts by another.
        sort=params.get("sort") or fast_p_key(DEFAULT_PICKED_P if p is None else p),
        descending=params.get("dir", "desc") != "asc",
    )
