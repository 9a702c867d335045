"""The GPU acceptance check's pure parts (benchmarks/gpu_check.py): what counts as two measurements
agreeing, and which build lines count. The check itself runs on a GPU host only."""

from __future__ import annotations

import json

from benchmarks.gpu_check import agree, builds_from_log, summary


def _m(status="correct", speedup=2.0, interval=(1.9, 2.1), notes=()):
    return {
        "status": status,
        "speedup": speedup,
        "interval": list(interval),
        "notes": list(notes),
        "flags": [],
        "stages": {},
        "started_at": None,
        "finished_at": None,
        "build": {},
    }


def test_two_figures_within_two_percent_agree():
    assert agree(_m(speedup=2.0), _m(speedup=2.03))
    assert not agree(_m(speedup=2.0), _m(speedup=2.2))


def test_a_host_bound_interval_that_covers_the_other_figure_agrees():
    first = _m(speedup=1.12, interval=(0.8, 30.0), notes=["host_bound"])
    assert agree(first, _m(speedup=8.01))
    assert not agree(_m(speedup=1.12, interval=(0.8, 30.0)), _m(speedup=8.01))  # not marked: no cover


def test_different_verdicts_never_agree():
    assert not agree(_m(), _m(status="incorrect", speedup=None))


def test_only_cuda_builds_that_compiled_are_counted():
    lines = [
        "INFO prebuild: built " + json.dumps({"seconds": 41.0, "cu_headers": "slim", "headers": "shared"}),
        "INFO prebuild: built " + json.dumps({"seconds": 0.2, "cu_headers": "slim", "headers": "shared"}),
        "INFO prebuild: built " + json.dumps({"seconds": 20.0, "cu_headers": "", "headers": "none"}),
        "INFO prebuild: built {broken",
    ]
    builds = builds_from_log("\n".join(lines))
    assert [b["seconds"] for b in builds] == [41.0]
    s = summary([{"measurements": [_m(), _m(speedup=2.01)]}], None, [], builds)
    assert s["repeat_within_2pct"] == 1.0 and s["shared_headers_share"] == 1.0 and s["cuda_build_median_s"] == 41.0
