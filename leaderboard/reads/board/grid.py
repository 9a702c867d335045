"""The level grid: the original leaderboard's main view, and better. Per level of a problem set,
each problem with its best kernels (GRID_KERNELS, as the original shows its top 5), each cell the
kernel's model, its speedup measured here and its published one, a mark where they disagree
beyond the measured interval or where the kernel fails here, and a link to the kernel's page.

Kernels rank by Kernel.ranked_speedup (stored by the read model: measured here, else imported,
else published; index kernel_problem_rank_idx); kernels a reviewer excluded are left out. One
query for the problems, one for the cells' kernels and one for their figures, served like every
board from its last complete build (leaderboard.reads.board.served).

The cells' kernels are each problem's first GRID_KERNELS read down that index (a LATERAL join on
PostgreSQL): a window over the level's kernels ranked every one of them, 20 s at 13 M kernels."""

from __future__ import annotations

from dataclasses import dataclass, field

from django.db import connection
from django.db.models import F, Window
from django.db.models.functions import RowNumber

from leaderboard.models import RANKED, Kernel, Origin
from leaderboard.reads.measured import kernel_wording
from problems.models import Problem, ProblemSet

GRID_KERNELS = 5

AGREES = ""
DISAGREES = "disagrees"  # the published speedup lies outside the interval measured here
FAILS_HERE = "fails here"  # measured here and not correct, though published as correct


@dataclass(frozen=True)
class Cell:
    kernel_id: int
    model: str
    demo: bool
    measured: float | None  # speedup measured here
    low: float | None
    high: float | None
    published: float | None
    published_label: str
    mark: str  # AGREES, DISAGREES or FAILS_HERE
    here: bool = False  # its latest evaluation was measured here, correct or not
    correct: bool | None = None

    @property
    def ranked(self) -> float | None:
        return self.measured if self.measured is not None else self.published

    @property
    def measured_text(self) -> str:
        """What the cell says of the measurement here when there is no speedup to show: the
        wording every page uses (a kernel measured here and failing is never "not measured")."""
        return kernel_wording(self.here, self.correct)


@dataclass
class GridRow:
    problem: Problem
    cells: list[Cell] = field(default_factory=list)


def mark(measured_here: bool, correct: bool | None, speedup, low, high, published) -> str:
    """How a kernel's measured result stands against its published figure."""
    if published is None or not measured_here:
        return AGREES
    if not correct:
        return FAILS_HERE
    lower = low if low is not None else speedup
    upper = high if high is not None else speedup
    if lower is None or upper is None:
        return AGREES
    return DISAGREES if not lower <= published <= upper else AGREES


def level_grid(problem_set: ProblemSet | None, level: int) -> list[GridRow]:
    """Every problem of the level, in number order, with its best kernels, best first."""
    if problem_set is None:
        return []
    problems = list(problem_set.problems.filter(level=level).defer("source").order_by("number"))
    rows = {problem.pk: GridRow(problem) for problem in problems}
    ranked = (
        Kernel.objects.filter(pk__in=_best_kernels([problem.pk for problem in problems]))
        .order_by(RANKED, "pk")  # each problem's cells best first, as its kernels were picked
        .values_list(
            "pk", "problem_id", "run__model__name", "run__is_demo", "run__model__is_demo",
            "latest_evaluation__origin", "latest_evaluation__correct", "latest_evaluation__speedup",
            "latest_evaluation__speedup_low", "latest_evaluation__speedup_high",
            "published_speedup", "published_hardware", "ranked_speedup",
        )
    )  # fmt: skip
    for pk, problem_id, model, demo, model_demo, origin, correct, speedup, low, high, pub, on, ranked_by in ranked:
        if ranked_by is None and pub is None and speedup is None:
            continue  # nothing to show: no speedup from any source
        here = origin in (Origin.MEASURED, Origin.DEMO)  # demo cells carry their demo label
        rows[problem_id].cells.append(
            Cell(
                pk, model, bool(demo or model_demo), speedup if here else None, low if here else None,
                high if here else None, pub, f"published, {on}" if on else "published",
                mark(here, correct, speedup, low, high, pub), here, correct,
            )
        )  # fmt: skip
    return list(rows.values())


# RANKED and its tie-break, written out: the ORM has no LATERAL join.
_BEST_BY_INDEX = """
    SELECT best.id FROM {problem} p CROSS JOIN LATERAL (
        SELECT k.id FROM {kernel} k WHERE k.problem_id = p.id AND NOT k.review_excluded
        ORDER BY COALESCE(k.ranked_speedup, 0.0) DESC, k.id ASC LIMIT %s
    ) best WHERE p.id = ANY(%s)"""


def _best_kernels(problem_ids: list[int]) -> list[int]:
    """The keys of each problem's first GRID_KERNELS kernels by RANKED (excluded ones left out)."""
    if connection.vendor == "postgresql":
        sql = _BEST_BY_INDEX.format(problem=Problem._meta.db_table, kernel=Kernel._meta.db_table)
        with connection.cursor() as cursor:
            cursor.execute(sql, [GRID_KERNELS, problem_ids])
            return [key for (key,) in cursor.fetchall()]
    # Elsewhere (SQLite: no LATERAL) a window over the problems' kernels: small databases only.
    ranked = (
        Kernel.objects.filter(problem_id__in=problem_ids, review_excluded=False)
        .annotate(place=Window(RowNumber(), partition_by=[F("problem_id")], order_by=[RANKED, F("pk").asc()]))
        .filter(place__lte=GRID_KERNELS)
    )
    return list(ranked.values_list("pk", flat=True))
