"""What the kernel page (leaderboard.views.kernel_detail) shows around the kernel itself: the
sibling it is diffed against, the two diffs, where each evaluation of its history stands, and which
evaluation the page describes."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from django.utils.safestring import SafeString

from evaluation.results.metrics import MIN_RUNTIME_MS, speedup_problem
from leaderboard.evaluations import progress as lifecycle
from leaderboard.models import Evaluation, Kernel, Origin
from leaderboard.reads import disclosure
from leaderboard.reads.diffs import Diff, compute_diff
from leaderboard.reads.instruments import instrument_views
from leaderboard.reads.measured import kernel_wording
from leaderboard.reads.options import select_options
from leaderboard.reads.queries import Sibling


def pick_against(requested: str | None, siblings: Sequence[Sibling]) -> Kernel | None:
    """The sibling kernel to diff against: the one asked for, else the fastest; with its source
    (the list itself carries no sources)."""
    if not siblings:
        return None
    chosen = next((k for k in siblings if requested and str(k.pk) == requested), siblings[0])
    return Kernel.objects.only("pk", "source").get(pk=chosen.pk)


def sibling_options(siblings: Sequence[Sibling], against: Kernel | None) -> SafeString:
    """The "compare with" list: each sibling by its label, the first (fastest) said so."""
    labels = ((other.pk, other.label + (" (fastest)" if index == 0 else "")) for index, other in enumerate(siblings))
    return select_options(labels, against.pk if against else None)


def reference_diff(kernel: Kernel) -> Diff | None:
    """None where the kernel's or the problem's source is not stored (source_withheld)."""
    if kernel.source_withheld or kernel.problem.source_withheld:
        return None
    return compute_diff(kernel.problem.source, kernel.source, "reference (class Model)", f"kernel {kernel.pk}")


def against_diff(kernel: Kernel, against: Kernel | None) -> Diff | None:
    if against is None or kernel.source_withheld or not against.source:
        return None
    return compute_diff(against.source, kernel.source, f"kernel {against.pk}", f"kernel {kernel.pk}")


def attach_progress(history: Sequence[Evaluation], raw_output: bool = False) -> list[lifecycle.Progress]:
    """Set `.progress` on each evaluation of a history page (one query per hardware for queue
    positions), without worker names unless `raw_output` (disclosure.py); returns the progress of
    those still queued or running."""
    progress = lifecycle.progress_many(history)
    for item in history:
        shown = progress[item.pk]
        item.progress = shown if raw_output else disclosure.public_progress(shown, item.worker_name)
    return [item.progress for item in history if item.state in Evaluation.PENDING_STATES]


def described_evaluation(kernel: Kernel, history: Sequence[Evaluation]) -> Evaluation | None:
    """The evaluation the page describes: the kernel's latest, else (none finished yet) its newest."""
    if kernel.latest_evaluation is not None or not history:
        return kernel.latest_evaluation
    return kernel.evaluations.select_related("hardware").first()


def is_demo(evaluation: Evaluation | None) -> bool:
    """Whether the evaluation was made up by seed_demo (its environment says so)."""
    return bool(evaluation and isinstance(evaluation.environment, dict) and evaluation.environment.get("demo"))


def measured_here(evaluation: Evaluation | None) -> bool:
    """Whether the evaluation the page describes was made by this site's workers (an imported run's
    kernel measured here is measured here; an imported or demo evaluation is not)."""
    return bool(evaluation and evaluation.origin == Origin.MEASURED and not is_demo(evaluation))


def measured_text(evaluation: Evaluation | None) -> str:
    """The page's "measured here (h200)" / "not yet measured here", in the wording every other page
    uses of the same kernel (the grid's cell, the board's counts): reads.measured.kernel_wording."""
    if evaluation is None or not measured_here(evaluation):
        return kernel_wording(False, None)
    return kernel_wording(True, evaluation.correct, evaluation.hardware.slug)


def shown_details(evaluation: Evaluation | None, raw_output: bool) -> dict:
    """The environment, infrastructure failure and instruments the page shows: all of them to those who may
    read raw output, the public part to others (disclosure.py)."""
    shown: dict = {"environment": {}, "failure_reason": "", "withheld_reason": disclosure.WITHHELD_REASON,
                   "instruments": []}  # fmt: skip
    if evaluation is not None and raw_output:
        shown.update(environment=evaluation.environment, failure_reason=evaluation.failure_reason,
                     instruments=instrument_views(evaluation.instruments))  # fmt: skip
    elif evaluation is not None:
        shown.update(
            environment=disclosure.public_environment(evaluation.environment),
            failure_reason=disclosure.hide_worker(evaluation.failure_reason, evaluation.worker_name),
            instruments=instrument_views(disclosure.public_instruments(evaluation.instruments)),
        )
    return shown


@dataclass(frozen=True)
class GpuTime:
    """An evaluation's device-time figures, as the scoring library stores them beside KernelBench's
    (evaluation/phases/host_bound.py: each timed call queued behind a wait on the GPU, so that the
    events time the forward's GPU work and not the host's dispatch)."""

    speedup: float | None  # None: withheld (`withheld` says why), or not a figure a measurement gives
    low: float | None
    high: float | None
    reference_ms: float | None
    kernel_ms: float | None
    host_bound: tuple[str, ...]  # the sides whose KernelBench figure times the host's dispatch
    withheld: str


WITHHELD_CHARS = 300  # the stored reason is shown as text; a longer one is cut


def gpu_time(evaluation: Evaluation | None) -> GpuTime | None:
    """The device-time figures of a correct evaluation made on a GPU (stored with its reference's
    timing), or None: a CPU's, an imported one without them, an incorrect kernel's, one whose
    KernelBench speedup was refused as implausible. The stored figures are checked as a speedup is
    before it is stored (attempts._apply_speedup): an exchanged result's JSON is stored as it came,
    so a figure that no measurement could give (not positive, above MAX_SPEEDUP, a kernel time under
    the floor, an interval that does not hold it) is not shown."""
    if evaluation is None or evaluation.speedup is None or not isinstance(evaluation.reference_timing, dict):
        return None
    device = evaluation.reference_timing.get("device")
    if not isinstance(device, dict):
        return None
    kernel_ms = _finite(device.get("kernel_ms"))
    speedup = _finite(device.get("speedup"))
    if speedup_problem(speedup) or (speedup is not None and (kernel_ms is None or kernel_ms < MIN_RUNTIME_MS)):
        speedup = None
    interval = device.get("speedup_interval")
    low, high = map(_finite, interval) if isinstance(interval, list | tuple) and len(interval) == 2 else (None, None)
    if speedup is None or low is None or high is None or not 0 < low <= speedup <= high:
        low = high = None
    withheld = device.get("withheld")
    bound = device.get("host_bound") if isinstance(device.get("host_bound"), dict) else {}
    return GpuTime(
        speedup=speedup,
        low=low,
        high=high,
        reference_ms=_finite(device.get("reference_ms")),
        kernel_ms=kernel_ms,
        host_bound=tuple(side for side in ("reference", "kernel") if bound.get(side) is True),
        withheld=withheld[:WITHHELD_CHARS] if isinstance(withheld, str) else "",
    )


def _finite(value: object) -> float | None:
    """A stored figure as a number, None where it is missing or not a finite one (stored JSON is anyone's)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        number = float(value)
    except OverflowError:  # an integer past a float's range
        return None
    return number if math.isfinite(number) else None
