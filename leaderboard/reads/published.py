"""Figures someone else published for kernels (Kernel.published_speedup: KernelBench's leaderboard,
timed on its L40S), read apart from the scores measured here: nothing in this module is ever
mixed into fast_p, and every number it gives carries its label ("published, L40S"). The boards'
published figures are stored by the read model (leaderboard.boards: RunScore.pub_*)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from leaderboard.models import Kernel, Run


@dataclass(frozen=True)
class PublishedFigure:
    """One kernel's published figure, for a run page."""

    kernel_id: int
    problem_id: int
    level: int
    number: int
    name: str
    speedup: float
    label: str  # "published, L40S"


def run_figures(run: Run) -> list[PublishedFigure]:
    """The run's published figures by problem (sample 0, the kernel the leaderboard listed); one query."""
    kernels = (
        Kernel.objects.filter(run=run, sample_index=0, published_speedup__isnull=False)
        .order_by("problem__level", "problem__number")
        .values_list("pk", "problem_id", "problem__level", "problem__number", "problem__name", "published_speedup",
                     "published_hardware")
    )  # fmt: skip
    return [
        PublishedFigure(pk, problem_id, level, number, name, speedup, f"published, {where}" if where else "published")
        for pk, problem_id, level, number, name, speedup, where in kernels
    ]


def published_fast_p(figures: Iterable[PublishedFigure], n_problems: int, p: float) -> float | None:
    """The published figures' fast_p over `n_problems` (the level's problems: unlisted ones count
    as failed): the share whose published speedup is above p."""
    if not n_problems:
        return None
    return sum(1 for figure in figures if figure.speedup > p) / n_problems
