"""What the kernel's process reports to the instruments is rebuilt by the parent from an allow-list
(evaluation/instruments/sanitize.py): a fake pair hands the phase hostile replies, as a kernel that
replaced the harness in its process could send them. No process, no torch."""

from __future__ import annotations

import dataclasses
import json
import math
import time
from typing import Any

from evaluation import EvaluationConfig, EvaluationResult
from evaluation.instruments import phase, precision, profile, sanitize
from evaluation.phases.session import Pair
from evaluation.sandbox.protocol import Request, parse

MARKUP = "<script>alert(document.cookie)</script>\x00\x1b[31m"
HOSTILE_PROFILE = {
    "activities": "x",
    "busy_share": float("nan"),
    "span_us": float("inf"),
    "busy_us": -5,
    "omitted": [1],
    "gaps": "many",
    "leaked": "/etc/passwd " * 1000,
    "events": [
        {"name": MARKUP + "A" * 10_000, "kind": "kernel", "us": "1e9", "start_us": 10**400, "x": 1},
        {"name": "fine", "kind": "<img src=x onerror=alert(1)>", "us": 1.0, "start_us": 0.0},
        *({"name": f"k{i}", "kind": "gpu_memcpy", "us": 1.0, "start_us": float(i)} for i in range(100_000)),
    ],
}
HOSTILE_MODES = {
    "matmul_allow_tf32": "yes<b>",
    "cudnn_allow_tf32": False,
    "float32_matmul_precision": "<i>x</i>",
    "fp16_reduced_reduction": True,
    "made_up": True,
}
HONEST_MODES = {
    "float32_matmul_precision": "highest",
    "matmul_allow_tf32": False,
    "cudnn_allow_tf32": True,
    "fp16_reduced_reduction": True,
    "bf16_reduced_reduction": True,
}


@dataclasses.dataclass
class FakePair(Pair):
    """A pair whose processes answer from ``replies`` ((op, what) -> (reference's, kernel's))."""

    replies: dict[tuple[str, Any], tuple[dict, dict]] = dataclasses.field(default_factory=dict)

    def both(self, msg: Request, cls: Any, with_ref2: bool = False) -> Any:
        ref, ker = self.replies[(msg.op, getattr(msg, "what", None))]
        return parse(cls, ref), parse(cls, ker)


def fake_pair(replies: dict, instruments: frozenset[str] = frozenset()) -> FakePair:
    cfg = EvaluationConfig(instruments=instruments)
    res = EvaluationResult(status="correct", correct=True)
    return FakePair(cfg, res, None, None, 1, time.monotonic() + 30, replies=replies)  # type: ignore[arg-type]


def test_a_hostile_profile_is_stored_rebuilt_from_the_allow_list():
    honest = profile.summarise([("gemm", "kernel", 0.0, 40.0)])
    pair = fake_pair(
        {("instrument", "profile"): ({"ok": True, "data": honest}, {"ok": True, "data": HOSTILE_PROFILE})},
        frozenset({"profile", "cpu_profile"}),
    )
    phase.run_instruments(pair, None)  # type: ignore[arg-type]
    stored = json.loads(json.dumps(pair.res.instruments, allow_nan=False))  # storable: no NaN, no infinity
    kernel = stored["profile"]["kernel"]
    assert set(kernel) == {"activities", "events", "omitted", "span_us", "busy_us", "busy_share", "gaps"}
    assert kernel["activities"] == 59 and kernel["busy_share"] is None and kernel["span_us"] == 0.0
    assert kernel["busy_us"] == 0.0 and kernel["gaps"] == {"count": 0, "total_us": 0.0, "max_us": 0.0}
    events = kernel["events"]
    assert len(events) == profile.MAX_EVENTS - 1 and kernel["omitted"] == 100_002 - len(events)
    assert {e["kind"] for e in events} <= set(profile.KINDS) and all(
        set(e) == {"name", "kind", "us", "start_us"} for e in events
    )
    first = events[0]
    assert len(first["name"]) == profile.NAME_CHARS and "\x00" not in first["name"] and "\x1b" not in first["name"]
    assert first["us"] == 0.0 and first["start_us"] == profile.MAX_US
    assert stored["profile"]["reference"] == honest
    assert len(json.dumps(stored)) <= sanitize.MAX_RECORD_BYTES


def test_the_kernels_math_switches_keep_known_keys_and_values_only():
    record, _ = precision.judge({}, HOSTILE_MODES, HONEST_MODES)
    assert record["modes_changed"] == {"cudnn_allow_tf32": False}
    assert precision.clean_modes(["not", "a", "dict"]) == {} and precision.clean_modes(HONEST_MODES) == HONEST_MODES


def test_a_failure_kind_the_kernel_names_is_not_written_into_the_shapes_detail():
    ok = {"ok": True, "data": {}}
    replies = {
        ("instrument", "sizes"): (ok, ok),
        ("correct", None): ({"ok": True}, {"ok": False, "kind": "<b>" + "k" * 10_000, "error": "e"}),
    }
    result, go_on = phase._one_shape(fake_pair(replies), None, 0, {"N": 64})  # type: ignore[arg-type]
    assert result["detail"] == "its forward failed (runtime_error)" and go_on


def test_a_stored_record_is_cleaned_the_same_way_and_cleaning_twice_changes_nothing():
    stored = {
        "profile": {"device": "cuda", "kernel": HOSTILE_PROFILE, "reference": profile.summarise([])},
        "precision": {"ratio": float("inf"), "modes_changed": HOSTILE_MODES},
        "shapes": {"variants": [{"detail": "its forward failed (<b>x</b>)"}, {"detail": "max abs diff 1e-06"}]},
        "determinism": {"skipped": "ended early: <i>pwned</i>", "error": "x"},
    }
    once = sanitize.clean_record(stored)
    assert once == sanitize.clean_record(once)
    assert once["precision"] == {
        "ratio": 1.7976931348623157e308,
        "modes_changed": {"cudnn_allow_tf32": False, "fp16_reduced_reduction": True},
    }
    assert [v["detail"] for v in once["shapes"]["variants"]] == [
        "its forward failed (runtime_error)",
        "max abs diff 1e-06",
    ]
    assert once["determinism"]["skipped"] == "ended early: runtime_error" and "leaked" not in once["profile"]["kernel"]
    assert not math.isnan(json.loads(json.dumps(once, allow_nan=False))["precision"]["ratio"])


def test_a_record_past_the_cap_loses_the_profiles_events_first_then_its_largest_instrument():
    events = [{"name": "n" * profile.NAME_CHARS, "kind": "kernel", "us": 1.0, "start_us": 0.0}] * profile.MAX_EVENTS
    side = {**profile.summarise([]), "events": events}
    record = {
        "profile": {"device": "cuda", "kernel": dict(side), "reference": dict(side)},
        "tolerance": {"trials": 5},
        "speed_of_light": {"flops_by_op": {f"op{i}": 1.0 for i in range(3500)}},
    }
    sanitize.cap_record(record)
    assert record["profile"]["kernel"]["events"] == [] and record["profile"]["kernel"]["omitted"] == profile.MAX_EVENTS
    assert "events_dropped" in record["profile"] and record["tolerance"] == {"trials": 5}
    big = {**record, "shapes": {"sizes": {f"N{i}": i for i in range(10_000)}}}
    sanitize.cap_record(big)
    assert big["shapes"] == {"skipped": f"dropped: the instruments' record passed {sanitize.MAX_RECORD_BYTES} bytes"}
    assert len(json.dumps(big)) <= sanitize.MAX_RECORD_BYTES and big["tolerance"] == {"trials": 5}
