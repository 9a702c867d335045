"""Figures someone else published for kernels (Kernel.published_speedup: KernelBench's leaderboard,
timed on its L40S), read apart from the scores measured here: nothing in this module is ever
mixed into fast_p, rankings or the stored read model, and every number it gives carries its label
("published, L40S")."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from django.db.models import Count, Q

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


@dataclass(frozen=True)
class BoardFigure:
    """A board row's published fast_p (over the level's problems) and its label."""

    fast_p: float
    label: str


def board_fast_p(runs: Iterable[Run], level: int | None, p: float, n_problems: int) -> dict[int, BoardFigure]:
    """For the board's rows from a published leaderboard: fast_p at p of their published figures,
    by run id, over the level's `n_problems` (unlisted problems count as failed); one query, and
    none when no such run is shown."""
    ids = [run.pk for run in runs if run.published_source]
    if not ids or not n_problems:
        return {}
    kernels = Kernel.objects.filter(run_id__in=ids, sample_index=0, published_speedup__isnull=False)
    if level is not None:
        kernels = kernels.filter(problem__level=level)
    rows = kernels.values_list("run_id", "published_hardware").annotate(n=Count("pk", filter=Q(published_speedup__gt=p)))
    figures = {}
    for run_id, where, n in rows.order_by():
        label = f"published, {where}" if where else "published"
        previous = figures.get(run_id)
        figures[run_id] = BoardFigure((previous.fast_p if previous else 0.0) + n / n_problems, label)
    return {run_id: figures.get(run_id, BoardFigure(0.0, "published")) for run_id in ids}
