"""The GPU acceptance check's pure parts (benchmarks/gpu_check.py): what counts as two measurements
agreeing, and which build lines count. The check itself runs on a GPU host only."""

from __future__ import annotations

import json

from benchmarks.gpu_check import agree, builds_from_log, device_agreement, job_seconds_from_log, summary


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
    lean = {"seconds": 9.0, "cu_headers": "lean", "headers": "lean"}
    full = {"seconds": 30.0, "cu_headers": "full", "headers": "none"}
    s = summary([{"measurements": [_m(), _m()]}], None, [], [lean, lean, lean, full])
    assert (s["shared_headers_share"], s["lean_headers_share"], s["cuda_build_median_s"]) == (0.75, 0.75, 9.0)


def _dev(speedup, interval):
    m = _m()
    m["device"] = {"speedup": speedup, "speedup_interval": list(interval)}
    return m


def test_device_figures_agree_by_their_gap_and_their_intervals():
    twice = [
        {"measurements": [_dev(1.175, (1.10, 1.25)), _dev(1.223, (1.15, 1.30))]},  # 4.1 % apart, covered
        {"measurements": [_dev(40.12, (40.0, 40.2)), _dev(40.08, (40.0, 40.2))]},  # 0.1 % apart
        {"measurements": [_dev(2.0, (1.99, 2.01)), _dev(2.2, (2.19, 2.21))]},  # 10 % apart, not covered
    ]
    got = device_agreement(twice)
    assert got["n"] == 3 and got["within_2pct"] == 0.333 and got["within_5pct"] == 0.667
    assert got["intervals_cover"] == 0.667 and got["largest_gap"] == 0.1


def test_the_instruments_follow_ups_count_from_the_workers_log():
    log = "\n".join(
        [
            "INFO rq.worker: Successfully completed evaluation 1 job in 0:00:05.5s on worker w",
            "INFO rq.worker: Successfully completed instruments of evaluation 1 job in 0:00:09.0s on worker w",
            "INFO rq.worker: Successfully completed instruments of evaluation 2 job in 0:00:00.04s on worker w",
            "INFO rq.worker: Successfully completed evaluation 2 job in 0:01:02.5s on worker w",
        ]
    )
    jobs = job_seconds_from_log(log)
    assert jobs == {"evaluation": 68.0, "instruments": 9.04}
    m = _m()
    m["stages"] = {"eval_total": 68.0}
    s = summary([{"measurements": [m]}], None, [], [], jobs)
    assert s["instruments_share"] == round(9.04 / (68.0 + 9.04), 3)
    assert summary([{"measurements": [m]}], None, [], [])["instruments_share"] == 0.0  # without the log: none seen


def test_the_summary_gives_each_stages_median_over_the_evaluations_that_recorded_it():
    ms = [_m(), _m(), _m()]
    for m, total, start in zip(ms, (4.0, 6.0, 5.0), (2.0, 0.1, 0.3), strict=True):
        m["stages"] = {"eval_total": total, "eval_process_start": start}
    ms[0]["stages"]["eval_turn_wait"] = 1.5
    s = summary([{"measurements": ms}], None, [], [])
    assert s["evaluation_median_s"] == {"total": 5.0, "process_start": 0.3, "turn_wait": 1.5}


def test_the_workers_per_gpu_come_from_the_workers_log():
    from benchmarks.gpu_check import workers_started

    assert workers_started("worker vm.1: h100 (...)\nworker vm.1: starting 2 workers\n") == 2
    assert workers_started("worker vm.1: h100 (...); queues eval-h100\n") == 1
    assert workers_started("") is None  # no worker's log: unknown, not one


def test_each_measurement_gets_the_sm_clock_sampled_over_its_evaluation(tmp_path):
    from datetime import datetime

    from benchmarks.gpu_check import with_clocks

    def at(second: int) -> str:
        return datetime(2026, 12, 7, 21, 0, second).strftime("%Y/%m/%d %H:%M:%S.%f")[:-3]

    csv = tmp_path / "gpu_util.csv"
    clocks = [1000, 1980, 1980, 1755, 1980, 1000]
    csv.write_text("".join(f"{at(i)}, 90, 2300, {mhz}\n" for i, mhz in enumerate(clocks)) + "garbled line\n")
    first, second, unsampled = _m(), _m(), _m()
    start = datetime(2026, 12, 7, 21, 0, 0).timestamp()
    first["started_at"], first["finished_at"] = start + 1, start + 3  # 1980, 1980, 1755
    second["started_at"], second["finished_at"] = start + 3, start + 4  # 1755, 1980
    table = [{"measurements": [first, second]}, {"measurements": [unsampled]}]
    with_clocks(table, csv)
    assert (first["sm_clock_mhz"], second["sm_clock_mhz"], unsampled["sm_clock_mhz"]) == (1980, 1867.5, None)
    assert summary(table, csv, [], [])["sm_clock_mhz_by_pass"] == [1980, 1867.5]  # pass 1: first (and unsampled)
    old = tmp_path / "old.csv"  # the samples before clocks.sm was asked for: three columns
    old.write_text(f"{at(2)}, 90, 2300\n")
    with_clocks(table, old)
    assert first["sm_clock_mhz"] is None and summary(table, old, [], [])["sm_clock_mhz_by_pass"] == [None, None]
