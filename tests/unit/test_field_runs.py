"""The field runs' figures (benchmarks/field_runs.py): which kernels a call measured, how two passes
compare, what a pass holds. The runs themselves happen on a GPU host only."""

from __future__ import annotations

import json
import time

import pytest

from benchmarks.field_runs import (
    call_figures,
    compare,
    keep,
    load,
    main,
    other_code,
    pass_figures,
    results_file,
    rounds_figures,
)
from evaluation.results.harness_id import harness_digest


def _row(problem, status="correct", speedup=2.0, low=1.9, high=2.1, notes=(), flags=(), queued=0, finished=6):
    return {
        "kernel": {"source_hash": f"h{problem}", "level": 1, "problem": problem, "model": "m"},
        "evaluation": {
            "status": status,
            "speedup": speedup,
            "speedup_low": low,
            "speedup_high": high,
            "notes": [{"code": c} for c in notes],
            "flags": [{"code": c} for c in flags],
            "environment": {"harness": "abc", "harness_commit": "1234567"},
            "queued_at": f"2026-12-04T12:00:{queued:02d}+00:00",
            "finished_at": f"2026-12-04T12:00:{finished:02d}+00:00",
            "stage_seconds": {"eval_total": 5.0, "eval_process_start": 2.0, "eval_timing": 1.0},
        },
    }


def _write(path, rows):
    path.write_text("\n".join(json.dumps(r) for r in [{"format": "kernelbench-results/1"}, *rows]) + "\n")
    return path


def test_a_pass_counts_verdicts_accusing_flags_and_host_bound_kernels(tmp_path):
    rows = [_row(1, notes=["host_bound"], flags=["near_zero_reference"]), _row(2, flags=["input_mutation"])]
    rows.append(_row(3, status="incorrect", speedup=None))
    figures = pass_figures(load(_write(tmp_path / "r.jsonl", rows)))
    assert figures["verdicts"] == {"correct": 2, "incorrect": 1}
    assert figures["exploit flags"] == {"input_mutation": 1}
    assert figures["host-bound (of the correct)"] == "1 of 2"
    assert figures["code (harness digest, commit)"] == {"abc (1234567)": 3}


def test_two_passes_agree_within_two_percent_or_by_a_host_bound_cover(tmp_path):
    a = load(
        _write(tmp_path / "a.jsonl", [_row(1), _row(2, speedup=1.1, low=0.5, high=9.0, notes=["host_bound"]), _row(3)])
    )
    b = load(_write(tmp_path / "b.jsonl", [_row(1, speedup=2.03), _row(2, speedup=8.0), _row(3, speedup=3.0)]))
    figures = compare(a, b)
    assert figures["speedup pairs"] == 3
    assert figures["within 2 % / 5 %"] == [1, 1]
    assert figures["agree (2 %, or a host-bound interval covers the other)"] == 2  # 1 within, 2 covered
    assert figures["over 5 % and not covered"] == 1  # problem 3: 2.0x against 3.0x, not host-bound
    assert figures["pairs that do not agree: L level problem, speedups (device-time speedups)"] == [
        "L1 3 h3: 2.00x / 3.00x"
    ]
    assert figures["over 5 % and not covered: which"] == ["L1 3 h3: 2.00x / 3.00x"]


def test_accusing_flags_that_differ_between_passes_are_named(tmp_path):
    a = load(_write(tmp_path / "a.jsonl", [_row(1, flags=["near_zero_reference"]), _row(2)]))
    b = load(_write(tmp_path / "b.jsonl", [_row(1), _row(2, status="incorrect", flags=["timing_output_mismatch"])]))
    figures = compare(a, b)
    # problem 1's near_zero_reference describes the problem, not the kernel: not named
    assert figures["accusing flags that differ"] == ["L1 2 h2: - / ['timing_output_mismatch']"]


def test_different_verdicts_are_named_and_never_paired(tmp_path):
    a = load(_write(tmp_path / "a.jsonl", [_row(1), _row(2)]))
    b = load(_write(tmp_path / "b.jsonl", [_row(1), _row(2, status="compile_error", speedup=None)]))
    figures = compare(a, b)
    assert figures["same verdict"] == 1
    assert figures["verdicts that differ"] == ["L1 2: correct / compile_error"]
    assert figures["speedup pairs"] == 1


@pytest.fixture
def utc(monkeypatch):
    """nvidia-smi writes the host's local time, the results UTC: the GPU hosts run in UTC."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def test_a_call_counts_only_the_kernels_its_results_add(tmp_path, utc):
    call = tmp_path / "call"
    call.mkdir()
    _write(call / "h200_results.jsonl", [_row(1), _row(2, queued=0, finished=30), _row(3, queued=10, finished=60 - 1)])
    (call / "evalworker.log").write_text(
        "x rq.worker: Successfully completed evaluation 2 job in 0:00:05.0s\n"
        "x rq.worker: Successfully completed instruments of evaluation 2 job in 0:00:01.0s\n"
        + "".join(
            "x prebuild: built "
            + json.dumps(
                {"status": "built", "seconds": total, "cu_headers": "slim", "headers": "built", "steps_s": steps}
            )
            + "\n"
            for total, steps in (
                (36.0, {"k/main.o": 10.0, "k/cuda.cuda.o": 30.0, "k/k.so": 0.5}),
                (50.0, {"j/main.o": 20.0, "j/cuda.cuda.o": 40.0, "j/j.so": 0.7}),
            )
        )
    )
    (call / "gpu_util.csv").write_text("2026/12/04 12:00:05.000, 50, 10\n2026/12/04 12:00:20.000, 0, 10\n")
    figures = call_figures(call, before={("h1", 1, 1)})
    assert figures["kernels measured"] == 2
    assert figures["first queued to last finished (s)"] == 59
    assert figures["GPU busy over that span"] == 0.5
    assert figures["instruments' share of the worker's jobs"] == round(1 / 6, 3)
    assert figures["CUDA build steps: median / p90 (s)"] == {
        "the wrapper (main.o)": [15.0, 20.0],
        "the .cu object": [35.0, 40.0],
        "the link": [0.6, 0.7],
    }
    assert figures["CUDA builds: n / median / p90 (s)"] == [2, 43.0, 50.0]


def test_keep_leaves_only_what_one_code_measured(tmp_path):
    old = _row(2)
    old["evaluation"]["environment"] = {}
    path = _write(tmp_path / "r.jsonl", [_row(1), old])
    kept = keep(path, "abc")
    assert len(kept) == 2 and json.loads(kept[0]) == {"format": "kernelbench-results/1"}
    assert json.loads(kept[1])["kernel"]["problem"] == 1
    assert keep(path, "other") == kept[:1]


def test_other_code_counts_the_results_another_harness_measured(tmp_path):
    rows = [_row(1), _row(2), _row(3)]
    rows[2]["evaluation"]["environment"] = {"harness": "def"}
    path = _write(tmp_path / "r.jsonl", rows)
    assert other_code(path, "abc") == {"def": 1}
    assert other_code(_write(tmp_path / "one.jsonl", rows[:2]), "abc") == {}
    with pytest.raises(SystemExit, match=f"3 result\\(s\\) of other code than {harness_digest()}"):
        main(["other-code", str(path)])  # by default, against this checkout's code


def test_a_calls_results_are_its_one_card_file(tmp_path):
    _write(tmp_path / "h100_results.jsonl", [_row(1)])
    assert results_file(tmp_path).name == "h100_results.jsonl"
    _write(tmp_path / "h200_results.jsonl", [_row(1)])
    with pytest.raises(SystemExit, match="expected one"):
        results_file(tmp_path)


def _timed(calls, ref_ms, ref_device_ms, host_bound=False):
    row = _row(1, notes=["host_bound"] if host_bound else [])["evaluation"]
    row.update(reference_ms=ref_ms, kernel_ms=10.0)
    row["reference_timing"] = {
        "calls_per_round": calls,
        "device": {"reference_ms": ref_device_ms, "kernel_ms": 10.0, "host_bound": {"reference": False}},
    }
    return row


def test_rounds_sets_timed_against_device_time_by_the_calls_a_round_held():
    evaluations = [_timed(2, 0.40, 0.35), _timed(2, 0.35, 0.35), _timed(50, 0.35, 0.35), _timed(2, 9.0, 0.35, True)]
    figures = rounds_figures(evaluations)
    assert figures == {
        "1-2 calls a round: n, reference timed/device median p90, kernel's": [2, 1.071, 1.143, 1.0, 1.0],
        "50+ calls a round: n, reference timed/device median p90, kernel's": [1, 1.0, 1.0, 1.0, 1.0],
    }  # the host-bound one is left out: its timed figure holds the host's dispatch by rule


def test_a_pair_line_keeps_three_figures_below_one_and_two_decimals_above(tmp_path):
    a = load(_write(tmp_path / "a.jsonl", [_row(1, speedup=0.0236), _row(2, speedup=123.4)]))
    b = load(_write(tmp_path / "b.jsonl", [_row(1, speedup=0.0258), _row(2, speedup=140.0)]))
    assert compare(a, b)["over 5 % and not covered: which"] == [
        "L1 1 h1: 0.0236x / 0.0258x",
        "L1 2 h2: 123.40x / 140.00x",
    ]
