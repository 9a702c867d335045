"""One level page's choices (`LevelBoard`): what params.py reads from a request and rows.py ranks
by. A module of its own, so that neither of those two needs the other's types."""

from __future__ import annotations

from dataclasses import dataclass

from problems.models import Hardware, ProblemSet


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
