"""Whether a kernel's measurements here repeat: its two most recent finished evaluations measured
here on one hardware, side by side, and whether they agree. The kernel page words it in full
("Measured twice on NVIDIA H200: 2.01x and 2.03x, 1.0% apart"), the problem page and the grid show
a compact mark ("×2, 1.0%"), and a board row counts its kernels measured twice and those that agree.

Two measurements agree when their verdicts are the same and, where both have a speedup, the
speedups lie within 2% of each other, or a host-bound one (the note the scoring library adds when
the host's dispatch is a large part of a side's time: evaluation/phases/host_bound.py) has a 95% interval
that covers the other's figure: a host-bound reading depends on the process and core that took it,
and its interval is widened to cover what another process reads. One rule, the GPU acceptance
check's too: evaluation.results.stats.speedups_agree.
One query for any number of kernels (a window over their evaluations, two rows per kernel and
hardware at most)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from django.db.models import Count, F, Q, Window
from django.db.models.functions import RowNumber

from evaluation.results.stats import AGREE_WITHIN, interval_covers, speedup_gap, speedups_agree, speedups_within
from leaderboard.models import Evaluation, Kernel, Origin, Run

HOST_BOUND = "host_bound"

AGREES = "agrees"
DIFFERS = "differs"
ONCE = "once"


@dataclass(frozen=True)
class Measurement:
    """One finished evaluation measured here, as a repeat compares it."""

    status: str
    speedup: float | None
    low: float | None
    high: float | None
    host_bound: bool
    finished_at: datetime | None

    def covers(self, figure: float | None) -> bool:
        """Its 95% interval holds `figure`."""
        return interval_covers((self.low, self.high), figure)

    @property
    def host_bound_interval(self) -> tuple[float | None, float | None] | None:
        """Its interval where it is host-bound (the only kind widened to cover another process's
        reading), else None."""
        return (self.low, self.high) if self.host_bound else None

    @property
    def verdict(self) -> str:
        return Evaluation.Status(self.status).label if self.status in Evaluation.Status.values else self.status


@dataclass(frozen=True)
class Repeat:
    """A kernel's measurements here on one hardware: `first` and `second` are its two most recent,
    oldest first (`second` is None when it was measured once); `times` counts them all."""

    kernel_id: int
    run_id: int
    hardware_id: int
    hardware: str  # the hardware's name, as pages name it
    times: int
    first: Measurement
    second: Measurement | None = None

    @property
    def twice(self) -> bool:
        return self.second is not None

    @property
    def verdicts_equal(self) -> bool:
        return self.second is not None and self.first.status == self.second.status

    @property
    def gap(self) -> float | None:
        """|a/b - 1| with b the smaller speedup (so 2.00x and 2.20x are 10% apart whichever came
        first); None unless both have a speedup."""
        return speedup_gap(self.first.speedup, self.second.speedup if self.second else None)

    @property
    def within(self) -> bool:
        """Both speedups within 2% of each other."""
        return speedups_within(self.first.speedup, self.second.speedup if self.second else None)

    @property
    def first_covers_second(self) -> bool:
        return self.second is not None and self.first.covers(self.second.speedup)

    @property
    def second_covers_first(self) -> bool:
        return self.second is not None and self.second.covers(self.first.speedup)

    @property
    def host_bound(self) -> bool:
        """Either measurement carries the host_bound note."""
        return self.first.host_bound or bool(self.second and self.second.host_bound)

    @property
    def covered(self) -> bool:
        """A host-bound measurement's interval covers the other's figure."""
        second = self.second
        return second is not None and (
            interval_covers(self.first.host_bound_interval, second.speedup)
            or interval_covers(second.host_bound_interval, self.first.speedup)
        )

    @property
    def agree(self) -> bool:
        """Same verdict and speedups that agree (evaluation.results.stats.speedups_agree)."""
        second = self.second
        if second is None or not self.verdicts_equal:
            return False
        first = self.first
        return speedups_agree(first.speedup, second.speedup, first.host_bound_interval, second.host_bound_interval)

    @property
    def agreement(self) -> str:
        """ONCE, AGREES or DIFFERS: what a page's mark is styled and tested by."""
        if not self.twice:
            return ONCE
        return AGREES if self.agree else DIFFERS

    @property
    def wording(self) -> str:
        """The kernel page's sentence: "Measured twice on NVIDIA H200: 2.01x and 2.03x, 1.0% apart"."""
        if not self.twice:
            return f"Measured once on {self.hardware}"
        if self.times == 2:
            return f"Measured twice on {self.hardware}: {self.comparison}"
        return f"Measured {self.times} times on {self.hardware}; the two most recent: {self.comparison}"

    @property
    def comparison(self) -> str:
        """The two measurements compared, oldest first, in words."""
        second = self.second
        if second is None:
            return ""
        if not self.verdicts_equal:
            return f"verdicts differ: {self.first.verdict} / {second.verdict}"
        gap = self.gap
        if gap is None:
            return f"{self.first.verdict} both times"
        figures = f"{self.first.speedup:.2f}x and {second.speedup:.2f}x, {gap * 100:.1f}% apart"
        if self.within:
            return figures
        if self.host_bound:
            return f"{figures}, host-bound: {self._cover_words()}"
        return f"{figures} (more than {AGREE_WITHIN:.0%})"

    def _cover_words(self) -> str:
        if self.first_covers_second and self.second_covers_first:
            return "each interval covers the other's figure"
        if self.first_covers_second:
            return "only the first interval covers the other's figure"
        if self.second_covers_first:
            return "only the second interval covers the other's figure"
        return "neither interval covers the other's figure"

    @property
    def mark(self) -> str:
        """The compact mark of the problem page and the grid: "×2, 1.0%", "×2, verdicts differ"."""
        if not self.twice:
            return "measured once"
        head = f"×{self.times}"
        if not self.verdicts_equal:
            return f"{head}, verdicts differ"
        gap = self.gap
        if gap is None:
            return f"{head}, same verdict"
        if self.within:
            return f"{head}, {gap * 100:.1f}%"
        if self.covered:
            return f"{head}, host-bound, covered"
        return f"{head}, {gap * 100:.1f}% apart"


@dataclass(frozen=True)
class RowRepeats:
    """A board row's kernels measured twice (or more) on its run's hardware, and how many agree."""

    twice: int
    agree: int

    @property
    def wording(self) -> str:
        kernels = "kernel" if self.twice == 1 else "kernels"
        return f"{self.twice} {kernels} measured twice: {self.agree} agree (within 2%, or host-bound and covered)"


def repeats_of(kernels: Iterable[int] | Iterable[Kernel]) -> dict[int, list[Repeat]]:
    """{kernel id: one Repeat per hardware it was measured on here}, for `kernels` (ids or kernels),
    in one query. Kernels never measured here are left out."""
    return _repeats(Q(kernel__in=kernels))


def _repeats(which: Q, least_times: int = 1) -> dict[int, list[Repeat]]:
    """`least_times`: only the kernels measured at least so often on a hardware (2 for a board's
    counts: at 13 M a board's shown rows have thousands of kernels measured once, which they skip)."""
    partition = [F("kernel_id"), F("hardware_id")]
    evaluations = (
        Evaluation.objects.filter(which, origin=Origin.MEASURED, state=Evaluation.State.DONE)
        .annotate(
            place=Window(
                RowNumber(), partition_by=partition, order_by=[F("finished_at").desc(nulls_last=True), F("pk").desc()]
            ),
            times=Window(Count("pk"), partition_by=partition),
        )
        .filter(place__lte=2, times__gte=least_times)
        .order_by("kernel_id", "hardware_id", "-place")  # oldest of the two first
        .values_list(
            "kernel_id", "kernel__run_id", "hardware_id", "hardware__name", "times",
            "status", "speedup", "speedup_low", "speedup_high", "notes", "finished_at",
        )
    )  # fmt: skip
    pairs: dict[tuple, list[Measurement]] = defaultdict(list)
    for kernel_id, run_id, hardware_id, hardware, times, *figures in evaluations:
        pairs[(kernel_id, run_id, hardware_id, hardware, times)].append(_measurement(*figures))
    found: dict[int, list[Repeat]] = defaultdict(list)
    for (kernel_id, run_id, hardware_id, hardware, times), measured in pairs.items():
        found[kernel_id].append(Repeat(kernel_id, run_id, hardware_id, hardware, times, *measured))
    return dict(found)


def kernel_repeats(kernel_id: int) -> list[Repeat]:
    """The kernel page's repeats: one per hardware the kernel was measured on here."""
    return repeats_of([kernel_id]).get(kernel_id, [])


def row_repeats(runs: Iterable[Run], level: int | None) -> dict[int, RowRepeats]:
    """{run id: its kernels of `level` (None: all levels) measured twice on the run's hardware, and
    those that agree}, for a board's shown rows, in one query."""
    hardware_of = {run.pk: run.hardware_id for run in runs}
    if not hardware_of:
        return {}
    # A join, not `kernel IN (subquery)`: with the statistics out of date (rows just loaded into
    # tables the planner still took for empty) the subquery was planned as nested full scans that
    # ran for minutes on a few hundred rows; the join is looked up by index whatever the estimates.
    which = Q(kernel__run_id__in=list(hardware_of))
    if level is not None:
        which &= Q(kernel__problem__level=level)
    twice: dict[int, int] = defaultdict(int)
    agree: dict[int, int] = defaultdict(int)
    for repeats in _repeats(which, least_times=2).values():
        for repeat in repeats:
            if repeat.twice and repeat.hardware_id == hardware_of[repeat.run_id]:
                twice[repeat.run_id] += 1
                agree[repeat.run_id] += repeat.agree
    return {run_id: RowRepeats(count, agree[run_id]) for run_id, count in twice.items()}


def _measurement(status, speedup, low, high, notes, finished_at) -> Measurement:
    host_bound = any(isinstance(note, dict) and note.get("code") == HOST_BOUND for note in notes or ())
    return Measurement(status, speedup, low, high, host_bound, finished_at)
