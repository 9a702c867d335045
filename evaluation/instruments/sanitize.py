"""Parent side: what the kernel's process reports to the instruments, rebuilt from an allow-list.

The kernel's process runs the kernel's code, which can replace the harness in it and reply with any
JSON up to the reply cap (strings for numbers, NaN, long lists, keys of its own, markup). The record
is stored and shown publicly, and the review queue sorts by its figures in SQL, so the parent keeps
only known keys, finite numbers within sane ranges, known categories and short printable text
(``profile.clean``, ``precision.clean_modes``, ``kind``; all three in ``clean_record``); last,
``finish`` makes every number of the record finite (JSON has no NaN or infinity: PostgreSQL refuses
them, and a kernel's huge outputs make an error infinite) and caps the whole record's size. The
reference's process runs trusted problem code; the same rules apply to it.
"""

from __future__ import annotations

import json
import math
import re
import sys
from typing import Any

from evaluation.instruments import precision, profile
from evaluation.instruments.bounds import count
from evaluation.results.types import STATUSES
from evaluation.sandbox.host_errors import INFRASTRUCTURE_ERROR

#: The record's most serialized bytes; past it the profiles' events go, then whole instruments.
MAX_RECORD_BYTES = 64 * 1024
#: The kinds a reply's failure may have (evaluation.child.harness); any other reads ``runtime_error``.
KINDS = frozenset({*STATUSES, INFRASTRUCTURE_ERROR, "deferred", "ipc_failed"})


def kind(value: Any) -> str:
    """A failure's kind as a process reported it, if it is one of ours."""
    return value if isinstance(value, str) and value in KINDS else "runtime_error"


def size(record: Any) -> int:
    return len(json.dumps(record, default=str))


def finite(value: Any) -> Any:
    """``value`` with every NaN float None and every infinite one the largest float of its sign."""
    if isinstance(value, float) and not math.isfinite(value):
        return None if math.isnan(value) else math.copysign(sys.float_info.max, value)
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v) for v in value]
    return value


# What the parent writes with a process's failure kind in it (phase: _one_shape, _record_abort).
_FAILED_DETAIL = re.compile(r"(its forward failed|ended early) \((.*)\)", re.S)
_ENDED = "ended early: "


def clean_record(instruments: Any) -> dict[str, Any]:
    """A copy of an instruments' record with every part a process reported rebuilt by the rules above:
    the profiles, the math switches, the failure kinds in the other shapes' details and in the skipped
    instruments, finite numbers. Idempotent: the phase applies it before storing, and pages and the
    API apply it to what is stored (records stored before these rules)."""
    if not isinstance(instruments, dict):
        return {}
    record: dict[str, Any] = finite(instruments)
    prof = record.get("profile")
    for side in ("kernel", "reference"):
        if isinstance(prof, dict) and side in prof:
            prof[side] = profile.clean(prof[side])
    prec = record.get("precision")
    if isinstance(prec, dict) and "modes_changed" in prec:
        prec["modes_changed"] = precision.clean_modes(prec["modes_changed"])
    variants = record["shapes"].get("variants") if isinstance(record.get("shapes"), dict) else None
    for v in variants if isinstance(variants, list) else []:
        m = _FAILED_DETAIL.fullmatch(v.get("detail") or "") if isinstance(v, dict) and isinstance(v.get("detail"), str) else None
        if m:
            v["detail"] = f"{m[1]} ({kind(m[2])})"
    for r in record.values():
        if isinstance(r, dict) and isinstance(r.get("skipped"), str) and r["skipped"].startswith(_ENDED):
            r["skipped"] = _ENDED + kind(r["skipped"][len(_ENDED):])
    return record


def finish(instruments: dict[str, Any]) -> None:
    """The record made storable, in place: rebuilt (``clean_record``), at most MAX_RECORD_BYTES."""
    cleaned = clean_record(instruments)
    instruments.clear()
    instruments.update(cleaned)
    cap_record(instruments)


def cap_record(instruments: dict[str, Any]) -> None:
    """Keep ``instruments`` within MAX_RECORD_BYTES serialized, in place: first the profiles' events
    go (the kernel's first; the profile says so), then the largest instruments, each left skipped."""
    if size(instruments) <= MAX_RECORD_BYTES:
        return
    prof = instruments.get("profile")
    for side in ("kernel", "reference"):
        p = prof.get(side) if isinstance(prof, dict) else None
        if isinstance(prof, dict) and isinstance(p, dict) and p.get("events"):
            p["omitted"] = count(p.get("omitted")) + len(p["events"])
            p["events"] = []
            prof["events_dropped"] = f"the instruments' record passed {MAX_RECORD_BYTES} bytes: events left out"
            if size(instruments) <= MAX_RECORD_BYTES:
                return
    for name in sorted(instruments, key=lambda n: size(instruments[n]), reverse=True):
        instruments[name] = {"skipped": f"dropped: the instruments' record passed {MAX_RECORD_BYTES} bytes"}
        if size(instruments) <= MAX_RECORD_BYTES:
            return
