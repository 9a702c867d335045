"""Plotly figures as plain dicts ({"data": [...], "layout": {...}}).

Pages embed them with `json_script` and static/js/charts.js draws them with the vendored
plotly.js. Plotly renders a few HTML-like tags inside labels (<b>, <a href>...), so every label made
from user-supplied text goes through `label()` first, which turns <, > and & into entities that
plotly shows as plain characters.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence
from typing import Any

from evaluation.results.metrics import fast_p_curve
from leaderboard.models import Evaluation, LaunchPost, Origin, ReportedScore
from leaderboard.reads.board.rows import StandingRow

Figure = dict[str, Any]

NEAR_CEILING = 85.0  # percent: the "near the ceiling" line of the scores-over-time chart (as the almanac draws it)
# Scores over time: one colour per variant (the most-reported first); the rest share one grey trace.
OVER_TIME_VARIANTS = 8
VARIANT_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22")
REPORTED_COLOUR = "#1f77b4"
MEASURED_COLOUR = "#d62728"
DEMO_COLOUR = "#9a9a9a"
PUBLISHED_COLOUR = "#6a5acd"
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f")


# Colour names for captions that describe marks (marks_caption): every colour a figure's marks use
# in such a chart must be named here.
COLOUR_NAMES = {MEASURED_COLOUR: "red", DEMO_COLOUR: "grey", REPORTED_COLOUR: "blue", PUBLISHED_COLOUR: "purple"}


def label(text: object) -> str:
    """User text made inert for plotly's pseudo-HTML labels."""
    return str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _legend_below(layout: dict[str, Any]) -> None:
    """A horizontal legend at the foot of the figure (container coordinates), below the x-axis and
    its title: plotly reserves its height in the bottom margin and pushes the axis's ticks and title
    above it (automargin), however many rows the legend wraps to. (A legend at a fixed paper y, the
    old layout, is anchored by its bottom edge and grew up into the axis title.)"""
    layout["legend"] = {
        "orientation": "h",
        "x": 0,
        "xanchor": "left",
        "xref": "container",
        "y": 0,
        "yanchor": "bottom",
        "yref": "container",
    }
    layout["xaxis"] = {"automargin": True, **(layout.get("xaxis") or {})}


def _layout(title: str = "", **extra: Any) -> dict[str, Any]:
    layout: dict[str, Any] = {
        "margin": {"l": 60, "r": 20, "t": 40 if title else 20, "b": 50},
        "hovermode": "closest",
        "font": {"family": "system-ui, sans-serif", "size": 12},
        "paper_bgcolor": "rgba(0,0,0,0)",
        "plot_bgcolor": "rgba(0,0,0,0)",
    }
    if title:
        layout["title"] = {"text": label(title), "font": {"size": 14}}
    layout.update(extra)
    if layout.get("showlegend", True) and "legend" not in extra:
        _legend_below(layout)
    return layout


def _run_label(row: StandingRow, published: bool = False) -> str:
    """A series' name, naming the one source its figures come from: the GPU they were measured on
    here (or imported from), or the published figures and their GPU; never a run's hardware beside
    figures timed on another ("h200 (published, L40S)")."""
    run = row.run
    demo = " (demo data)" if run.is_demo or run.model.is_demo else ""
    if published:
        source = row.published_label
    elif run.origin == Origin.IMPORTED and not row.measured_kernels:
        source = f"imported, {run.hardware.slug}"
    else:
        source = f"measured on {run.hardware.slug}"
    return label(f"{run.model.name} · {run.setting} · {source}{demo}")


def _pad_dates(figure: Figure | None, days: int = 45) -> Figure | None:
    """Give a date axis a sensible span: with one day only, plotly would zoom to milliseconds."""
    if figure is None:
        return None
    dates = sorted(dt.date.fromisoformat(str(x)[:10]) for trace in figure["data"] for x in trace.get("x", []))
    if dates and (dates[-1] - dates[0]).days < days:
        pad = dt.timedelta(days=days)
        figure["layout"].setdefault("xaxis", {})["range"] = [
            (dates[0] - pad).isoformat(),
            (dates[-1] + pad).isoformat(),
        ]
    return figure


def _date(value: dt.date | dt.datetime) -> str:
    return value.date().isoformat() if isinstance(value, dt.datetime) else value.isoformat()


# ---------------------------------------------------------------------------------------------
# overview and model page


def _variant_bars(index: int, group: Any) -> dict[str, Any]:
    """One variant's bars: a bold header row naming the variant, then its models, in its own colour."""
    # Category names must be unique across groups: a model in two variants gets two rows,
    # told apart by invisible zero-width spaces.
    suffix = "\u200b" * index
    header = f"<b>{label(group.key)}</b>{suffix}"
    names = [f"{label(s.model.name)}{suffix}" for s in group.scores]
    return {
        "type": "bar",
        "orientation": "h",
        "name": label(group.key),
        "x": [None, *[s.value for s in group.scores]],
        "y": [header, *names],
        "text": ["", *[s.display_value for s in group.scores]],
        "textposition": "outside",
        "cliponaxis": False,
        "marker": {"color": PALETTE[index % len(PALETTE)]},
        "hovertext": [
            "",
            *[
                label(f"{s.model.name}: {s.display_value} on {group.variant} ({s.display_date}) {s.setting}")
                for s in group.scores
            ],
        ],
        "hoverinfo": "text",
    }


def reported_bars(groups: Sequence[Any], unit: str) -> Figure | None:
    """Horizontal bars of each model's best reported score, grouped by variant: each group has a
    bold header row naming its variant, its own colour, and its models ranked inside it only."""
    traces = [_variant_bars(index, group) for index, group in enumerate(g for g in groups if g.unit == unit)]
    if not traces:
        return None
    categories = [category for trace in traces for category in trace["y"]]
    title = (
        "Best reported score per model, by variant (%)"
        if unit == "%"
        else "Best reported speedup per model, by variant (x)"
    )
    values = [x for trace in traces for x in trace["x"] if x is not None]
    return {
        "data": traces,
        "layout": _layout(
            title,
            height=max(260, 22 * len(categories) + 100),
            showlegend=False,
            bargap=0.25,
            margin={"l": 20, "r": 40, "t": 40, "b": 40},
            xaxis={
                "title": {"text": "percent" if unit == "%" else "speedup (x)"},
                "range": [0, max(values) * 1.12 if values else 1],
            },
            yaxis={
                "automargin": True,
                "type": "category",
                "categoryorder": "array",
                "categoryarray": categories,
                "autorange": "reversed",
            },
        ),
    }


def _reported_by_variant(reported: list[ReportedScore]) -> list[dict[str, Any]]:
    """Reported percentages as circles, one colour per variant (the OVER_TIME_VARIANTS most
    reported; the others grey, together), each dot labelled by its model on hover."""
    by_variant: dict[str, list[ReportedScore]] = {}
    for score in reported:
        by_variant.setdefault(score.variant, []).append(score)
    ranked = sorted(by_variant, key=lambda v: (-len(by_variant[v]), v))
    groups = [(v, by_variant[v], VARIANT_COLOURS[i]) for i, v in enumerate(ranked[:OVER_TIME_VARIANTS])]
    rest = [s for v in ranked[OVER_TIME_VARIANTS:] for s in by_variant[v]]
    if rest:
        groups.append((f"{len(ranked) - OVER_TIME_VARIANTS} other variants", rest, DEMO_COLOUR))
    return [_reported_dots(name, scores, colour) for name, scores, colour in groups]


def _reported_dots(name: str, reported: list[ReportedScore], colour: str) -> dict[str, Any]:
    """One variant's reported percentages as circles, as published."""
    return {
        "type": "scatter",
        "mode": "markers",
        "name": label(name),
        "legendgroup": "reported",
        "legendgrouptitle": {"text": "reported (as published), by variant"},
        "x": [s.reported_on.isoformat() for s in reported],
        "y": [s.value for s in reported],
        "marker": {"symbol": "circle", "size": 9, "color": colour, "opacity": 0.8},
        "hovertext": [
            label(f"{s.model.name}: {s.display_value} · {s.variant} · {s.metric} ({s.display_date})") for s in reported
        ],
        "hoverinfo": "text",
    }


def _measured_diamonds(points: list[tuple[dt.date, StandingRow]], is_demo: bool) -> dict[str, Any]:
    """fast_1 measured here as diamonds; demo runs hollow and grey."""
    return {
        "type": "scatter",
        "mode": "markers",
        "name": "fast_1, all levels (demo data)" if is_demo else "fast_1, all levels",
        "legendgroup": "measured",
        "legendgrouptitle": {"text": "measured here (not comparable with reported scores)"},
        "x": [_date(date) for date, _ in points],
        "y": [round(row.fast_p(1.0) * 100, 2) for _, row in points],
        "marker": {
            "symbol": "diamond-open" if is_demo else "diamond",
            "size": 12,
            "color": DEMO_COLOUR if is_demo else MEASURED_COLOUR,
            "line": {"width": 2},
        },
        "hovertext": [
            f"{label(row.run.model.name)}: fast_1 {row.fast_p(1.0) * 100:.1f}% · {_run_label(row)}" for _, row in points
        ],
        "hoverinfo": "text",
    }


def _published_diamonds(points: list[tuple[dt.date, StandingRow]], where: str) -> dict[str, Any]:
    """Published fast_1 of runs not measured here yet, as purple diamonds named with their GPU."""
    return {
        "type": "scatter",
        "mode": "markers",
        "name": f"fast_1, all levels ({label(where)})",
        "legendgroup": "published",
        "legendgrouptitle": {"text": "published, not measured here"},
        "x": [_date(date) for date, _ in points],
        "y": [round((row.published_fast_1 or 0.0) * 100, 2) for _, row in points],
        "marker": {"symbol": "diamond", "size": 12, "color": PUBLISHED_COLOUR, "line": {"width": 2}},
        "hovertext": [
            f"{label(row.run.model.name)}: fast_1 {(row.published_fast_1 or 0.0) * 100:.1f}% "
            f"· {_run_label(row, published=True)}"
            for _, row in points
        ],
        "hoverinfo": "text",
    }


def _near_ceiling() -> dict[str, Any]:
    """The dashed "near the ceiling" line and its label, as layout entries."""
    line = {
        "type": "line",
        "xref": "paper",
        "x0": 0,
        "x1": 1,
        "y0": NEAR_CEILING,
        "y1": NEAR_CEILING,
        "line": {"dash": "dash", "color": "#555", "width": 1},
    }
    note = {
        "xref": "paper",
        "x": 0,
        "y": NEAR_CEILING,
        "yanchor": "bottom",
        "xanchor": "left",
        "text": f"near the ceiling ({NEAR_CEILING:g}%)",
        "showarrow": False,
        "font": {"size": 11, "color": "#555"},
    }
    return {"shapes": [line], "annotations": [note]}


def scores_over_time(
    reported: Iterable[ReportedScore],
    measured: Iterable[tuple[dt.date, StandingRow]],
    published: Iterable[tuple[dt.date, StandingRow]] = (),
) -> Figure | None:
    """Each score a dot over time: reported percentages (circles) apart from fast_1 measured
    here (diamonds; demo runs hollow and grey) and the published fast_1 of runs not measured here
    yet (purple diamonds, one trace per GPU), with a "near the ceiling" line."""
    reported = [s for s in reported if s.unit == "%"]
    measured = list(measured)
    traces: list[dict[str, Any]] = _reported_by_variant(reported)
    for is_demo in (False, True):
        points = [(date, row) for date, row in measured if (row.run.is_demo or row.run.model.is_demo) == is_demo]
        if points:
            traces.append(_measured_diamonds(points, is_demo))
    by_gpu: dict[str, list[tuple[dt.date, StandingRow]]] = {}
    for date, row in published:
        by_gpu.setdefault(row.published_label, []).append((date, row))
    traces += [_published_diamonds(points, where) for where, points in by_gpu.items()]
    if not traces:
        return None
    layout = _layout(
        "Scores over time (percent scores; variants differ, see the table)",
        height=380,
        yaxis={"title": {"text": "score (%)"}, "range": [0, 105]},
        xaxis={"type": "date"},
        **_near_ceiling(),
    )
    return _pad_dates({"data": traces, "layout": layout})


def launch_timeline(posts: Iterable[LaunchPost]) -> Figure | None:
    """Launch posts per lab over time: posts that list KernelBench tall and red, the others
    short and grey (the caption, marks_caption, is read from these traces)."""
    posts = list(posts)
    if not posts:
        return None
    traces = []
    for lists in (True, False):
        chosen = [p for p in posts if p.lists_kernelbench == lists]
        if not chosen:
            continue
        colour = MEASURED_COLOUR if lists else DEMO_COLOUR
        traces.append(
            {
                "type": "scatter",
                "mode": "markers",
                "name": "posts that list KernelBench" if lists else "posts that do not",
                "x": [p.published_on.isoformat() for p in chosen],
                "y": [label(p.lab.name) for p in chosen],
                # An open symbol is stroked in marker.color (plotly ignores marker.line.color for it).
                "marker": {
                    "symbol": "line-ns-open",
                    "size": 34 if lists else 12,
                    "color": colour,
                    "line": {"width": 4 if lists else 2, "color": colour},
                },
                "hovertext": [
                    label(
                        f"{p.title} ({p.published_on.isoformat()})"
                        + (f": {p.kernelbench_score}" if p.kernelbench_score else "")
                        + (" (demo data)" if p.is_demo else "")
                    )
                    for p in chosen
                ],
                "hoverinfo": "text",
            }
        )
    labs = sorted({label(p.lab.name) for p in posts})
    return _pad_dates(
        {
            "data": traces,
            "layout": _layout(
                "Launch posts per lab",
                height=max(220, 60 * len(labs) + 120),
                xaxis={"type": "date"},
                yaxis={"type": "category", "categoryorder": "array", "categoryarray": labs, "automargin": True},
            ),
        }
    )


def marks_caption(figure: Figure | None) -> str:
    """What each trace's marks look like, read from the figure itself ("Tall red marks: posts that
    list KernelBench; short grey marks: posts that do not."): the colour each mark is drawn in
    (marker.color), and tall or short only where the traces' mark sizes differ. A colour without a
    name in COLOUR_NAMES is left out rather than guessed."""
    if not figure:
        return ""
    markers = [(trace.get("marker") or {}, trace.get("name", "")) for trace in figure["data"]]
    sizes = {marker.get("size") for marker, _ in markers}
    tallest = max((size for size in sizes if size is not None), default=None)
    parts = []
    for marker, name in markers:
        height = ("tall" if marker.get("size") == tallest else "short") if len(sizes) > 1 else ""
        colour = COLOUR_NAMES.get(str(marker.get("color", "")).lower(), "")
        parts.append(" ".join(word for word in (height, colour, "marks") if word) + f": {name}")
    text = "; ".join(parts)
    return text[:1].upper() + text[1:] + "." if text else ""


# ---------------------------------------------------------------------------------------------
# per-level leaderboard


def _curve_trace(row: StandingRow, colour: str, published: bool) -> dict[str, Any]:
    """One row's fast_p over p: measured here solid (dotted for an imported run), published dashed
    and named with its GPU."""
    tally = row.score.published if published else row.tally
    points = fast_p_curve(list(tally.speedups), row.n_problems)
    name = _run_label(row, published)
    dash = "dash" if published else ("dot" if row.run.origin == "imported" else "solid")
    return {
        "type": "scatter",
        "mode": "lines",
        "line": {"shape": "hv", "color": colour, "dash": dash},
        "name": name,
        "x": [point[0] for point in points],
        "y": [round(point[1] * 100, 2) for point in points],
        "hovertemplate": "p=%{x:.2f}: %{y:.1f}%<extra>" + name + "</extra>",
    }


def fast_p_chart(rows: Sequence[StandingRow], p: float | None) -> Figure | None:
    """fast_p as a step function of p for each shown run, by each source: measured here (a row
    not yet measured here has no measured line), and its published figures where it has any,
    dashed in the same colour; a dotted line at the picked p."""
    traces = []
    for index, row in enumerate(rows):
        colour = PALETTE[index % len(PALETTE)]
        if row.measured_kernels or not row.has_published:
            traces.append(_curve_trace(row, colour, published=False))
        if row.has_published:
            traces.append(_curve_trace(row, colour, published=True))
    if not traces:
        return None
    shapes = []
    if p is not None:
        shapes.append(
            {
                "type": "line",
                "yref": "paper",
                "x0": p,
                "x1": p,
                "y0": 0,
                "y1": 1,
                "line": {"dash": "dot", "color": "#555"},
            }
        )
    return {
        "data": traces,
        "layout": _layout(
            "fast_p over p (share of the level's problems correct and faster than p × the reference)",
            height=380,
            xaxis={"title": {"text": "p (speedup threshold)"}, "range": [0, 3]},
            yaxis={"title": {"text": "fast_p (%)"}, "range": [0, 100]},
            shapes=shapes,
        ),
    }


def model_history(
    reported: Iterable[ReportedScore],
    measured: Iterable[tuple[dt.date, StandingRow]],
    published: Iterable[tuple[dt.date, StandingRow]] = (),
) -> Figure | None:
    """One model over time: reported percentages, fast_1 measured here and the published fast_1
    of runs not measured here yet on the left axis, reported speedups (x) on the right axis, so
    units never share a scale."""
    reported = list(reported)
    figure = scores_over_time(reported, measured, published)
    speedups = [s for s in reported if s.unit == "x"]
    if speedups:
        trace = {
            "type": "scatter",
            "mode": "markers",
            "name": "reported speedup (x, right axis)",
            "x": [s.reported_on.isoformat() for s in speedups],
            "y": [s.value for s in speedups],
            "yaxis": "y2",
            "marker": {"symbol": "square", "size": 9, "color": "#ff7f0e"},
            "hovertext": [label(f"{s.variant} · {s.metric} {s.display_value} ({s.display_date})") for s in speedups],
            "hoverinfo": "text",
        }
        if figure is None:
            figure = {
                "data": [],
                "layout": _layout(
                    "", height=380, xaxis={"type": "date"}, yaxis={"title": {"text": "score (%)"}, "range": [0, 105]}
                ),
            }
        figure["data"].append(trace)
        figure["layout"]["yaxis2"] = {
            "title": {"text": "speedup (x)"},
            "overlaying": "y",
            "side": "right",
            "rangemode": "tozero",
            "showgrid": False,
        }
        figure["layout"]["margin"]["r"] = 60
    if figure is not None:
        figure["layout"]["title"] = {"text": "History: reported scores and fast_1 measured here", "font": {"size": 14}}
    return _pad_dates(figure)


# ---------------------------------------------------------------------------------------------
# problem and kernel pages


def speedup_bars(points: Sequence[tuple[int, str, bool, float, bool]]) -> Figure | None:
    """Speedups of the kernels of one problem, fastest first, with the 1x line: measured or
    imported here in blue, published figures (not measured here) purple, demo data grey."""
    if not points:
        return None

    def colour(demo: bool, published: bool) -> str:
        return DEMO_COLOUR if demo else PUBLISHED_COLOUR if published else REPORTED_COLOUR

    return {
        "data": [
            {
                "type": "bar",
                "x": [f"#{pk}" for pk, *_ in points],
                "y": [speedup for _, _, _, speedup, _ in points],
                "marker": {"color": [colour(demo, published) for _, _, demo, _, published in points]},
                "hovertext": [
                    label(
                        f"kernel {pk}, {name}{' (demo data)' if demo else ''}: {speedup:.3g}x"
                        + (" (published, not measured here)" if published else "")
                    )
                    for pk, name, demo, speedup, published in points
                ],
                "hoverinfo": "text",
                "name": "speedup",
            }
        ],
        "layout": _layout(
            "Speedup of each kernel (reference time / kernel time; purple: published, not measured here)",
            height=320,
            xaxis={"type": "category", "title": {"text": "kernel"}},
            yaxis={"title": {"text": "speedup (x)"}, "rangemode": "tozero"},
            shapes=[
                {
                    "type": "line",
                    "xref": "paper",
                    "x0": 0,
                    "x1": 1,
                    "y0": 1,
                    "y1": 1,
                    "line": {"dash": "dash", "color": "#555"},
                }
            ],
        ),
    }


def _box(name: str, timing: dict, median: float | None, colour: str) -> dict[str, Any] | None:
    samples = timing.get("samples") if isinstance(timing, dict) else None
    if isinstance(samples, list) and samples and all(isinstance(x, int | float) for x in samples):
        return {
            "type": "box",
            "name": name,
            "x": samples,
            "boxpoints": "all",
            "jitter": 0.4,
            "marker": {"color": colour},
        }
    stats = {key: timing.get(key) for key in ("min", "median", "max")} if isinstance(timing, dict) else {}
    middle = stats.get("median") if isinstance(stats.get("median"), int | float) else median
    if not isinstance(middle, int | float):
        return None
    low = stats.get("min") if isinstance(stats.get("min"), int | float) else middle
    high = stats.get("max") if isinstance(stats.get("max"), int | float) else middle
    return {
        "type": "box",
        "name": name,
        "orientation": "h",
        "y": [name],
        "q1": [middle],
        "median": [middle],
        "q3": [middle],
        "lowerfence": [low],
        "upperfence": [high],
        "marker": {"color": colour},
    }


def timing_distributions(evaluation: Evaluation | None) -> Figure | None:
    """Timing samples of kernel and reference (box plots); medians alone when samples are missing."""
    if evaluation is None:
        return None
    boxes = [
        _box("kernel", evaluation.kernel_timing, evaluation.kernel_ms, MEASURED_COLOUR),
        _box("reference", evaluation.reference_timing, evaluation.reference_ms, REPORTED_COLOUR),
    ]
    boxes = [box for box in boxes if box is not None]
    if not boxes:
        return None
    return {
        "data": boxes,
        "layout": _layout(
            "Timing distributions (ms per call)",
            height=260,
            showlegend=False,
            xaxis={"title": {"text": "ms"}, "rangemode": "tozero"},
        ),
    }


# ---------------------------------------------------------------------------------------------
# run page


def run_fast_p_chart(scores: Sequence[Any]) -> Figure | None:
    """A run's fast_p over p, one line per level (runs.LevelScore): sample 0 (KernelBench's rule)
    solid, best-of-n dotted where the run has several samples."""
    traces = []
    for index, score in enumerate(scores):
        colour = PALETTE[index % len(PALETTE)]
        curves = [("sample 0", score.curve, "solid"), ("best-of-n", score.curve_best, "dot")]
        for rule, points, dash in curves:
            if not points:
                continue
            name = f"level {score.level}, {rule}"
            traces.append(
                {
                    "type": "scatter",
                    "mode": "lines",
                    "line": {"shape": "hv", "color": colour, "dash": dash},
                    "name": name,
                    "x": [point[0] for point in points],
                    "y": [round(point[1] * 100, 2) for point in points],
                    "hovertemplate": "p=%{x:.2f}: %{y:.1f}%<extra>" + name + "</extra>",
                }
            )
    if not traces:
        return None
    return {
        "data": traces,
        "layout": _layout(
            "fast_p over p (share of the level's problems correct and faster than p × the reference)",
            height=360,
            xaxis={"title": {"text": "p (speedup threshold)"}, "range": [0, 3]},
            yaxis={"title": {"text": "fast_p (%)"}, "range": [0, 100]},
        ),
    }
