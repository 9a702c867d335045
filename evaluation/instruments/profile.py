"""A profile of one forward of the kernel and of the reference, taken after the timed rounds.

On a GPU: ``torch.profiler`` (CUPTI) around one forward on fresh inputs, in each process; the
record lists each GPU activity (kernel launch, copy, memset) with its duration, the forward's GPU
span (first activity's start to last one's end), the busy share (the union of the activities over
the span) and the host gaps (idle stretches between activities, the launch overhead a fused kernel
removes). The kernel's profile comes from the kernel's own process: informative, not a verdict.

On the CPU the same record holds the forward's top-level operators (a CPU profile costs a few
milliseconds): no GPU, so busy share and gaps describe the operators back to back.
"""

from __future__ import annotations

import json
import os
from typing import Any

from evaluation.instruments.bounds import count, number, text

MAX_EVENTS = 60  # activities kept per side (the longest), the rest summed
NAME_CHARS = 120
GPU_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")
KINDS = (*GPU_CATEGORIES, "cpu_op")  # an event's kind: a GPU activity, or (CPU profile) an operator
MAX_US = 3.6e9  # an hour: no figure of one forward's profile is longer


def profile_forward(torch: Any, call: Any, device: str, workdir: str) -> dict[str, Any]:
    """Profile ``call()`` (one forward, synchronised). Child side, reference or kernel process."""
    from torch.profiler import ProfilerActivity, profile  # deferred: torch is passed in, not imported here

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
    with profile(activities=activities) as prof:
        call()
    if device != "cuda":
        spans = [(e.name, "cpu_op", e.time_range.start, e.time_range.end) for e in prof.events()
                 if e.cpu_parent is None]
        return summarise(spans)
    path = os.path.join(workdir, "profile_trace.json")
    prof.export_chrome_trace(path)
    try:
        with open(path, encoding="utf-8") as fh:
            events = json.load(fh).get("traceEvents", [])
    finally:
        os.unlink(path)
    spans = [(str(e.get("name", "")), str(e.get("cat")), float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0)))
             for e in events if e.get("cat") in GPU_CATEGORIES and "ts" in e]
    return summarise(spans)


def summarise(spans: list[tuple[str, str, float, float]]) -> dict[str, Any]:
    """(name, kind, start µs, end µs) activities -> the record: events, span, busy share, gaps."""
    spans = sorted(spans, key=lambda s: s[2])
    if not spans:
        return {"activities": 0, "events": [], "span_us": 0.0, "busy_us": 0.0, "busy_share": None,
                "gaps": {"count": 0, "total_us": 0.0, "max_us": 0.0}}
    busy, gaps, edge = 0.0, [], spans[0][2]
    for _, _, start, end in spans:
        if start > edge:
            gaps.append(start - edge)
        busy += max(0.0, end - max(start, edge))
        edge = max(edge, end)
    span = edge - spans[0][2]
    ordered = sorted(spans, key=lambda s: s[3] - s[2], reverse=True)
    kept = [{"name": n[:NAME_CHARS], "kind": k, "us": round(e - s, 3), "start_us": round(s - spans[0][2], 3)}
            for n, k, s, e in ordered[:MAX_EVENTS]]
    return {"activities": len(spans), "events": sorted(kept, key=lambda e: e["start_us"]),
            "omitted": max(0, len(spans) - MAX_EVENTS), "span_us": round(span, 3), "busy_us": round(busy, 3),
            "busy_share": round(busy / span, 4) if span > 0 else 1.0,
            "gaps": {"count": len(gaps), "total_us": round(sum(gaps), 3), "max_us": round(max(gaps, default=0.0), 3)}}


def clean(data: Any) -> dict[str, Any]:
    """Parent side: a process's profile (``summarise``'s record, as its reply says) rebuilt from the
    record's own keys, with finite numbers in range, known kinds, at most MAX_EVENTS events and short
    printable names; the kernel's process may have replied anything (instruments.sanitize)."""
    d: dict[str, Any] = data if isinstance(data, dict) else {}
    raw: list[Any] = d["events"] if isinstance(d.get("events"), list) else []
    events = []
    for e in raw[:MAX_EVENTS]:
        if isinstance(e, dict) and e.get("kind") in KINDS:
            events.append({"name": text(e.get("name"), NAME_CHARS), "kind": e["kind"],
                           "us": number(e.get("us"), 0.0, MAX_US) or 0.0,
                           "start_us": number(e.get("start_us"), 0.0, MAX_US) or 0.0})
    g: dict[str, Any] = d["gaps"] if isinstance(d.get("gaps"), dict) else {}
    return {"activities": max(count(d.get("activities")), len(events)), "events": events,
            "omitted": count(d.get("omitted")) + len(raw) - len(events),
            "span_us": number(d.get("span_us"), 0.0, MAX_US) or 0.0,
            "busy_us": number(d.get("busy_us"), 0.0, MAX_US) or 0.0,
            "busy_share": number(d.get("busy_share"), 0.0, 1.0),
            "gaps": {"count": count(g.get("count")), "total_us": number(g.get("total_us"), 0.0, MAX_US) or 0.0,
                     "max_us": number(g.get("max_us"), 0.0, MAX_US) or 0.0}}
