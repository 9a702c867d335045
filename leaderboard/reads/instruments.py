"""The reviewer's instruments as pages show them: one summary per instrument, from the record the
scoring library stored on the Evaluation (evaluation/instruments/, docs/evaluation.md
"Instruments"). The queue sorts by the same figures (leaderboard.reviews.services.QUEUE_SORTS)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from evaluation.instruments import bounds
from evaluation.instruments.sanitize import clean_record

# The figure each queue sort reads, as a path into Evaluation.instruments.
SORT_FIGURES: dict[str, tuple[str, ...]] = {
    "sol": ("speed_of_light", "kernel_fraction"),
    "precision": ("precision", "ratio"),
    "margin": ("tolerance", "worst_ratio"),
    "busy": ("profile", "kernel", "busy_share"),
}
# A figure at or past this size is no figure (NULL in the queue's SQL sort too: JSONNumber).
FIGURE_LIMIT = 1e300


@dataclass
class InstrumentView:
    name: str
    title: str
    summary: str
    flagged: bool = False
    details: list[tuple[str, str]] = field(default_factory=list)


def figure(instruments: Any, name: str) -> float | None:
    """The figure a queue sort reads (SORT_FIGURES), or None."""
    value: Any = instruments
    for key in SORT_FIGURES[name]:
        value = value.get(key) if isinstance(value, dict) else None
    number = bounds.number(value, -FIGURE_LIMIT, FIGURE_LIMIT)  # None: not a finite number
    return number if number is not None and abs(number) < FIGURE_LIMIT else None


def _g(x: Any, spec: str = ".3g") -> str:
    return format(float(x), spec) if isinstance(x, (int, float)) and not isinstance(x, bool) else "–"


def _skipped(name: str, title: str, record: dict) -> InstrumentView | None:
    if "skipped" in record and len(record) <= 2:
        # The error where the record still has it (raw output: leaderboard/reads/disclosure.py).
        details = [("error", str(record["error"]))] if record.get("error") else []
        return InstrumentView(name, title, f"not measured: {record['skipped']}", details=details)
    return None


def _precision(r: dict) -> InstrumentView:
    view = _skipped("precision", "Precision used", r)
    if view:
        return view
    down = bool(r.get("downgrade"))
    summary = (
        f"error against fp64 {_g(r.get('kernel_rel_l2'))} (relative L2), {_g(r.get('ratio'), '.1f')}× the fp32 "
        f"reference's own {_g(r.get('reference_rel_l2'))}" + (": lower precision" if down else "")
    )
    details = [
        ("kernel max abs error vs fp64", _g(r.get("kernel_max_abs"))),
        ("reference max abs error vs fp64", _g(r.get("reference_max_abs"))),
    ]
    if r.get("modes_changed"):
        details.append(
            ("math switches changed by the kernel", ", ".join(f"{k}={v}" for k, v in r["modes_changed"].items()))
        )
    return InstrumentView("precision", "Precision used", summary, down, details)


def _shapes(r: dict) -> InstrumentView:
    sizes = ", ".join(f"{k}={v}" for k, v in (r.get("sizes") or {}).items())
    variants = [v for v in r.get("variants") or [] if isinstance(v, dict)]
    if not variants:
        return InstrumentView("shapes", "Other shapes", f"not measured: {r.get('skipped', 'no other sizes')}")
    verdicts = ", ".join(f"{v.get('label')}: {v.get('verdict')}" for v in variants)
    details = [
        (
            f"{v.get('label')} ({', '.join(f'{k}={n}' for k, n in (v.get('sizes') or {}).items())})",
            f"{v.get('verdict')}: {v.get('detail', '')}" + (f" ({v['error']})" if v.get("error") else ""),
        )
        for v in variants
    ]  # the kernel's error text only where the record still has it (raw output)
    return InstrumentView("shapes", "Other shapes", f"given {sizes}; {verdicts}", bool(r.get("specialised")), details)


def _determinism(r: dict) -> InstrumentView:
    view = _skipped("determinism", "Determinism", r)
    if view:
        return view
    same = bool(r.get("identical"))
    summary = "two runs on the same inputs: identical" if same else "two runs on the same inputs: outputs differ"
    diffs = r.get("max_abs_diff") or []
    return InstrumentView(
        "determinism",
        "Determinism",
        summary,
        not same,
        [("max abs error of each run", ", ".join(_g(d) for d in diffs))],
    )


def _speed_of_light(r: dict) -> InstrumentView:
    view = _skipped("speed_of_light", "Speed of light", r)
    if view:
        return view
    # Records made before the bound was the problem's bytes alone also carry the reference's FLOPs.
    has_flops = r.get("flops") is not None
    work = f"{_g((r.get('bytes') or 0) / 1e6)} MB" + (f", {_g((r.get('flops') or 0) / 1e9)} GFLOP" if has_flops else "")
    work += " at least"
    if not r.get("peaks"):
        return InstrumentView("speed_of_light", "Speed of light", f"{work}; no peaks known for this hardware")
    summary = (
        f"{work}; least time {_g(r.get('sol_ms'))} ms ({r.get('bound')}-bound); kernel at "
        f"{_g(r.get('kernel_fraction'), '.1%')} of it, reference at {_g(r.get('reference_fraction'), '.1%')}"
    )
    peaks = r["peaks"]
    details = [
        (
            "peaks",
            f"{_g(peaks.get('bytes_per_s', 0) / 1e12)} TB/s"
            + (f", {_g(peaks.get('flops_per_s', 0) / 1e12)} TFLOP/s" if has_flops else ""),
        ),
        (
            "kernel achieved",
            f"{_g((r.get('kernel_bytes_per_s') or 0) / 1e12)} TB/s"
            + (f", {_g((r.get('kernel_flops_per_s') or 0) / 1e12)} TFLOP/s" if has_flops else ""),
        ),
    ]
    if has_flops:
        details.append(
            (
                "FLOPs counted by operator",
                ", ".join(f"{k} {_g(v)}" for k, v in (r.get("flops_by_op") or {}).items()) or "none",
            )
        )
    return InstrumentView("speed_of_light", "Speed of light", summary, bool(r.get("impossible")), details)


def _profile(r: dict) -> InstrumentView:
    view = _skipped("profile", "Profile", r)
    if view:
        return view
    details = []
    for side in ("kernel", "reference"):
        p = r.get(side) or {}
        gaps = p.get("gaps") or {}
        details.append(
            (
                side,
                f"{p.get('activities', 0)} activities over {_g(p.get('span_us'))} µs, busy "
                f"{_g(p.get('busy_share'), '.0%')}, {gaps.get('count', 0)} gaps totalling "
                f"{_g(gaps.get('total_us'))} µs (longest {_g(gaps.get('max_us'))} µs)",
            )
        )
        for e in (p.get("events") or [])[:12]:
            if isinstance(e, dict):
                details.append((f"  {side} · {e.get('kind')}", f"{e.get('name')}: {_g(e.get('us'))} µs"))
    k = r.get("kernel") or {}
    return InstrumentView(
        "profile",
        "Profile (one forward)",
        f"kernel busy {_g(k.get('busy_share'), '.0%')} of its {_g(k.get('span_us'))} µs span",
        False,
        details,
    )


def _tolerance(r: dict) -> InstrumentView:
    near = bool(r.get("near"))
    summary = (
        f"largest error {_g(r.get('worst_ratio'), '.0%')} of the tolerance (margin {_g(r.get('margin'), '.0%')}) "
        f"over {r.get('trials', 0)} trials"
        + (f", {r.get('extra_trials')} of them extra" if r.get("extra_trials") else "")
    )
    return InstrumentView("tolerance", "Tolerance margin", summary, near)


BUILDERS = (
    ("tolerance", _tolerance),
    ("precision", _precision),
    ("shapes", _shapes),
    ("determinism", _determinism),
    ("speed_of_light", _speed_of_light),
    ("profile", _profile),
)


def instrument_views(instruments: Any) -> list[InstrumentView]:
    """One view per instrument the record holds, in a fixed order."""
    if not isinstance(instruments, dict):
        return []
    instruments = clean_record(instruments)  # what the kernel's process reported, from the allow-list
    return [build(instruments[name]) for name, build in BUILDERS if isinstance(instruments.get(name), dict)]
