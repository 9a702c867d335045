"""benchmarks/gpu/two_modes.py, the step-5 script of docs/field.md, on the CPU: it keeps every timed
call of both processes, round by round, and switches the variant's timing steps off (the GPU run is
the script's purpose; here, that it runs and records what it says)."""

from __future__ import annotations

import json

from benchmarks.gpu import two_modes
from tests.evaluation.helpers import EVAL_PROBLEMS


def test_it_keeps_each_rounds_calls_for_both_processes(tmp_path, capsys):
    out = tmp_path / "two_modes.jsonl"
    code = two_modes.main([str(EVAL_PROBLEMS / "add_one.py"), "--device", "cpu", "--repeat", "1",
                           "--variants", "no_placement", "--out", str(out)])  # fmt: skip
    assert code == 0
    (line,) = [json.loads(text) for text in out.read_text().splitlines()]
    assert line["variant"] == "no_placement" and line["status"] == "correct"
    assert line["rounds"] and all({"reference", "kernel"} <= set(r) for r in line["rounds"])
    assert all(len(r["reference"]) == len(r["kernel"]) > 0 for r in line["rounds"])
    assert "no_placement: speedup" in capsys.readouterr().err


def test_the_wrapper_is_taken_off_after_the_evaluation():
    from evaluation.phases import timing

    watched = timing._watched_call
    with two_modes.CallTimes():
        assert timing._watched_call is not watched
    assert timing._watched_call is watched


def test_the_summary_leaves_the_check_call_out_and_compares_each_process_with_itself():
    # Two evaluations (two processes), one 10 % slower throughout: no call is in the slow mode.
    def line(scale: float) -> dict:
        rounds = [{"reference": [1.0 * scale, 1.0 * scale, 1.0 * scale, 9.0]} for _ in range(2)]
        return {"variant": "default", "device": "cuda", "speedup": 1.0, "rounds": rounds}

    (head, reference) = two_modes.summary([line(1.0), line(1.1)])
    assert reference.startswith("  reference: 12 calls") and reference.endswith("fastest: 0%")
