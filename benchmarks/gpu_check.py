"""The GPU acceptance check's driver: a fixed set of field kernels, each measured twice through the
site's own path (the queue, `manage.py evalworker` and its look-ahead builder, the database), then
the figures DESIGN.md names, written as `summary.json` beside one row per kernel.

Run by benchmarks/gpu_check.sh on a bare GPU host (Redis and the worker started there); here only
its pure parts are tested (tests/unit/test_gpu_check.py). Usage, with Django configured:
    python benchmarks/gpu_check.py queue [rotated]  # queue the set (rotated: its first kernel last)
    python benchmarks/gpu_check.py wait DEADLINE    # until nothing is pending or the epoch DEADLINE
    python benchmarks/gpu_check.py summary OUT_DIR GPU_UTIL_CSV SELFCHECK_JSONL WORKER_LOG
"""

from __future__ import annotations

import json
import math
import os
import re
import statistics
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as a script on the GPU host, from the checkout
    sys.path.insert(0, str(REPO))

from evaluation.results.stats import interval_covers, speedup_gap, speedups_agree  # noqa: E402

#: (level, problem, model): launch-bound ones whose reference moved between runs on the H200, GPU-bound
#: ones, the diag(A) @ B kernels (honest >10x), a small MLP, and one incorrect kernel.
CHECK_SET: list[tuple[int, int, str]] = [
    (2, 14, "Claude 3.5 Sonnet"),
    (2, 14, "GPT-4o"),
    (2, 9, "Gemini 1.5 Flash"),
    (2, 56, "Gemini 1.5 Flash"),
    (2, 51, "o1-preview"),
    (1, 97, "o1-preview"),
    (2, 29, "o1-preview"),
    (1, 88, "o1-preview"),
    (1, 12, "Gemini 1.5 Flash"),
    (1, 12, "o1-preview"),
    (1, 12, "Claude 3.5 Sonnet"),
    (2, 20, "Claude 3.5 Sonnet"),
    (2, 26, "o1-preview"),
    (3, 4, "Claude 3.5 Sonnet"),
    (3, 1, "Gemini 1.5 Flash"),
    (2, 22, "GPT-4o"),
]
#: Flags that accuse a kernel of a trick (not information such as the reference's own properties).
EXPLOIT_FLAGS = {
    "reference_patched",
    "patched_timer",
    "timing_mismatch",
    "side_stream_work",
    "input_mutation",
    "output_reuse",
    "harness_memory_access",
    "unjoined_thread",
    "timing_output_mismatch",
    "forged_reply",
    "background_cpu_work",
    "impossible_speed",
    "lazy_tensor",
    "fallback_to_reference",
}


def _setup() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django  # deferred: the pure parts below are tested without Django

    django.setup()


def chosen_kernels() -> list[Any]:
    from leaderboard.models import Kernel  # deferred: needs Django set up

    kernels = []
    for level, number, model in CHECK_SET:
        k = (
            Kernel.objects.filter(problem__level=level, problem__number=number, run__model__name=model)
            .select_related("run")
            .order_by("pk")
            .first()
        )
        if k is not None:
            kernels.append(k)
    return kernels


def queue(order: str = "") -> None:
    """Queue the set in CHECK_SET's order or (``rotated``) with its first kernel last: with two
    workers per GPU the first evaluation of pass 2 runs beside the other worker's paused follow-up
    (docs/workers.md), and the next launch-bound kernel there (L2 14 GPT-4o) tells that place from
    that kernel (L2 14 Claude)."""
    from leaderboard.evaluations.queue import request_evaluations  # deferred: needs Django set up
    from problems.models import Hardware  # deferred: needs Django set up

    kernels = chosen_kernels()
    if order == "rotated":
        kernels = kernels[1:] + kernels[:1]
    elif order:
        raise SystemExit(f"gpu_check: unknown order {order!r} (rotated, or nothing)")
    requested = request_evaluations(kernels, Hardware.objects.get(slug="h200"), None)
    print(f"gpu_check: {len(requested.queued)} of {len(CHECK_SET)} kernels queued ({len(requested.skipped)} pending)")


def wait(deadline: float) -> None:
    from leaderboard.models import Evaluation  # deferred: needs Django set up

    while time.time() < deadline:
        left = Evaluation.objects.pending().count()
        if left == 0:
            print("gpu_check: nothing pending")
            return
        time.sleep(3)
    print(f"gpu_check: deadline reached with {Evaluation.objects.pending().count()} pending")


def rows() -> list[dict[str, Any]]:
    from leaderboard.models import Evaluation  # deferred: needs Django set up

    out = []
    for k in chosen_kernels():
        evs = list(Evaluation.objects.filter(kernel=k, state="done", origin="measured").order_by("finished_at"))
        out.append(
            {
                "level": k.problem.level,
                "problem": k.problem.number,
                "model": k.run.model.name,
                "measurements": [_measurement(e) for e in evs[:2]],
            }
        )
    return out


def _measurement(e: Any) -> dict[str, Any]:
    device = (e.reference_timing or {}).get("device") or {}
    stages = e.stage_seconds or {}
    return {
        "status": e.status,
        "speedup": e.speedup,
        "interval": [e.speedup_low, e.speedup_high],
        "reference_ms": e.reference_ms,
        "kernel_ms": e.kernel_ms,
        "device": device,
        # Per-call time the parent's clock saw beyond what each process reported: the kernel's
        # excess over the reference's is what a parent-clock bound on the GPU must allow.
        "unaccounted_ms": {
            "reference": (e.reference_timing or {}).get("unaccounted_ms"),
            "kernel": (e.kernel_timing or {}).get("unaccounted_ms"),
        },
        "flags": sorted({f.get("code", "") for f in e.flags or [] if isinstance(f, dict)}),
        "notes": sorted({f.get("code", "") for f in e.notes or [] if isinstance(f, dict)}),
        "stages": {k: v for k, v in stages.items() if isinstance(v, (int, float))},
        "started_at": e.started_at.timestamp() if e.started_at else None,
        "finished_at": e.finished_at.timestamp() if e.finished_at else None,
        "build": (e.environment or {}).get("build") or {},
    }


def agree(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Two measurements of a kernel agree: same verdict and speedups that agree
    (evaluation.results.stats.speedups_agree: within 2 %, or a host-bound side's interval covers the other)."""
    return a["status"] == b["status"] and speedups_agree(
        a.get("speedup"), b.get("speedup"), _host_bound_interval(a), _host_bound_interval(b)
    )


def _host_bound_interval(m: dict[str, Any]) -> list[Any] | None:
    return m.get("interval") if "host_bound" in m["notes"] else None


def _within(a: dict[str, Any], b: dict[str, Any], rel: float, key: str = "speedup") -> bool:
    """Same verdict and, when both have the figure, within ``rel`` of each other."""
    if a["status"] != b["status"]:
        return False
    gap = speedup_gap(_figure(a, key), _figure(b, key))
    return gap is None or gap <= rel


def _figure(m: dict[str, Any], key: str) -> Any:
    return m.get("speedup") if key == "speedup" else (m.get("device") or {}).get("speedup")


def device_agreement(twice: list[dict[str, Any]]) -> dict[str, Any]:
    """The device-time speedups of kernels measured twice: the share within 2 % and 5 % of each
    other, the share whose two intervals each cover the other's figure, and the largest gap."""
    pairs = [r["measurements"] for r in twice if all(_figure(m, "device") for m in r["measurements"])]
    gaps = [g for a, b in pairs if (g := speedup_gap(_figure(a, "device"), _figure(b, "device"))) is not None]
    cover = [
        all(
            interval_covers((x.get("device") or {}).get("speedup_interval"), _figure(y, "device"))
            for x, y in ((a, b), (b, a))
        )
        for a, b in pairs
    ]
    return {
        "n": len(pairs),
        "within_2pct": _share(sum(g <= 0.02 for g in gaps), len(pairs)),
        "within_5pct": _share(sum(g <= 0.05 for g in gaps), len(pairs)),
        "intervals_cover": _share(sum(cover), len(pairs)),
        "largest_gap": round(max(gaps), 4) if gaps else None,
    }


def sampled(csv_path: Path, start: float, end: float, column: int) -> list[float]:
    """One column of nvidia-smi's one-second samples (timestamp, utilization.gpu, memory.used,
    clocks.sm) taken between start and end (epoch seconds); lines without it are skipped."""
    from datetime import datetime  # deferred: only the summary reads the samples

    values = []
    for line in csv_path.read_text().splitlines():
        parts = [p.strip() for p in line.split(",")]
        try:
            t = datetime.strptime(parts[0], "%Y/%m/%d %H:%M:%S.%f").timestamp()
            value = float(parts[column])
        except (ValueError, IndexError):
            continue
        if start <= t <= end:
            values.append(value)
    return values


def gpu_busy(csv_path: Path, start: float, end: float) -> float | None:
    """Share of the samples between start and end with the GPU busy (utilization.gpu > 0)."""
    util = sampled(csv_path, start, end, 1)
    return sum(u > 0 for u in util) / len(util) if util else None


def sm_clock_mhz(csv_path: Path, start: float, end: float) -> float | None:
    """Median SM clock (MHz) of the samples between start and end; None where the samples lack it
    (gpu_check.sh asks for it since 55c7ffe; earlier runs' files have three columns)."""
    clocks = sampled(csv_path, start, end, 3)
    return statistics.median(clocks) if clocks else None


def with_clocks(table: list[dict[str, Any]], util_csv: Path | None) -> None:
    """Each measurement's median SM clock over its evaluation (``sm_clock_mhz``), where sampled."""
    for r in table:
        for m in r["measurements"]:
            have = util_csv is not None and util_csv.exists() and m["started_at"] and m["finished_at"]
            m["sm_clock_mhz"] = sm_clock_mhz(util_csv, m["started_at"], m["finished_at"]) if have else None


def _pass_clock(ms: list[dict[str, Any]]) -> float | None:
    clocks = [m["sm_clock_mhz"] for m in ms if m.get("sm_clock_mhz") is not None]
    return statistics.median(clocks) if clocks else None


def _pass_busy(util_csv: Path | None, ms: list[dict[str, Any]]) -> float | None:
    starts = [m["started_at"] for m in ms if m["started_at"]]
    ends = [m["finished_at"] for m in ms if m["finished_at"]]
    if not (util_csv and util_csv.exists() and starts and ends):
        return None
    busy = gpu_busy(util_csv, min(starts), max(ends))
    return round(busy, 3) if busy is not None else None


def builds_from_log(text: str) -> list[dict[str, Any]]:
    """The look-ahead builder's outcomes (``prebuild: built {json}`` lines of the worker's log) that
    compiled CUDA (a ``.cu`` file), not those found built."""
    out = []
    for line in text.splitlines():
        _, sep, rest = line.partition("prebuild: built ")
        if not sep:
            continue
        try:
            d = json.loads(rest)
        except ValueError:
            continue
        if d.get("cu_headers") and d.get("seconds", 0) > 1:
            out.append(d)
    return out


_JOB_DONE = re.compile(r"Successfully completed (instruments of )?evaluation \d+ job in (\d+):(\d+):([\d.]+)s")


def job_seconds_from_log(text: str) -> dict[str, float]:
    """Seconds the worker's jobs held it, from RQ's ``Successfully completed ... job in H:MM:SS``
    lines: evaluations, and the instruments' follow-ups (whose time no stored row keeps where a
    later measurement of the same kernel dropped them)."""
    seconds = {"evaluation": 0.0, "instruments": 0.0}
    for m in _JOB_DONE.finditer(text):
        kind = "instruments" if m.group(1) else "evaluation"
        seconds[kind] += int(m.group(2)) * 3600 + int(m.group(3)) * 60 + float(m.group(4))
    return seconds


_WORKERS_STARTED = re.compile(r"starting (\d+) workers?\b")


def workers_started(text: str) -> int | None:
    """Workers `evalworker` started (its ``starting N workers`` line; one where it ran a single
    worker in its own process and printed none; None where the log holds no worker at all): on the
    check's one GPU, the workers per GPU."""
    m = _WORKERS_STARTED.search(text)
    if m:
        return int(m.group(1))
    return 1 if re.search(r"^worker \S+: ", text, re.M) else None


def summary(
    table: list[dict[str, Any]],
    util_csv: Path | None,
    selfchecks: list[dict[str, Any]],
    builds: list[dict[str, Any]],
    jobs: dict[str, float] | None = None,
) -> dict[str, Any]:
    twice = [r for r in table if len(r["measurements"]) == 2]
    ms = [m for r in table for m in r["measurements"]]
    starts = [m["started_at"] for m in ms if m["started_at"]]
    ends = [m["finished_at"] for m in ms if m["finished_at"]]
    seconds = [b["seconds"] for b in builds]
    clean = [m for r in table for m in r["measurements"] if m["status"] == "correct"]
    headers = [b.get("headers") for b in builds]
    passes = [[r["measurements"][i] for r in table if len(r["measurements"]) > i] for i in (0, 1)]
    return {
        "kernels": len(table),
        "measured_twice": len(twice),
        "repeat_within_2pct": _share(sum(agree(*r["measurements"]) for r in twice), len(twice)),
        # The same without the host-bound intervals' cover, and the device-time figure's agreement.
        "repeat_within_2pct_strict": _share(sum(_within(*r["measurements"], 0.02) for r in twice), len(twice)),
        "device_repeat": device_agreement(twice),
        "verdicts_equal": _share(
            sum(r["measurements"][0]["status"] == r["measurements"][1]["status"] for r in twice), len(twice)
        ),
        "exploit_flags_on_clean": sum(len(set(m["flags"]) & EXPLOIT_FLAGS) for m in clean),
        "instruments_share": _instruments_share(ms, jobs),
        "worker_job_seconds": {k: round(v, 1) for k, v in (jobs or {}).items()},
        "gpu_busy": gpu_busy(util_csv, min(starts), max(ends)) if util_csv and util_csv.exists() and starts else None,
        # Each pass apart too: the first holds the cold builds' wait, the second the GPU's own pace.
        "gpu_busy_by_pass": [_pass_busy(util_csv, p) for p in passes],
        # The SM clock over each pass's evaluations (median of their medians; with_clocks).
        "sm_clock_mhz_by_pass": [_pass_clock(p) for p in passes],
        "kernels_per_min": _rate(ms),
        # Each pass apart: the first waits for cold builds, the second finds them built.
        "kernels_per_min_by_pass": [_rate(p) for p in passes],
        "cuda_builds": len(seconds),
        "cuda_build_median_s": round(statistics.median(seconds), 1) if seconds else None,
        "cuda_build_p90_s": round(p90(seconds), 1) if seconds else None,
        # Shared headers: the precompiled ones, or the lean folder (a lean build's, written once per host).
        "shared_headers_share": _share(sum(h in ("shared", "built", "lean") for h in headers), len(headers)),
        "lean_headers_share": _share(sum(h == "lean" for h in headers), len(headers)),
        "parent_clock_excess_ms": _excess(clean),
        "selfchecks": [{k: s.get(k) for k in ("problem", "speedup", "speedup_interval", "device")} for s in selfchecks],
        "evaluation_median_s": stage_medians(ms),
    }


def _instruments_share(ms: list[dict[str, Any]], jobs: dict[str, float] | None) -> float | None:
    """The instruments' share of the GPU-held time. They run in the evaluation, or later in a
    follow-up job of their own (the site's deferred instruments): then the follow-up's whole time is
    theirs, and GPU-held time too. The worker's log holds every follow-up's time; the rows only
    those still stored."""
    later = max(sum(m["stages"].get("instruments_later_total", 0.0) for m in ms), (jobs or {}).get("instruments", 0.0))
    instr = later + sum(
        m["stages"].get("eval_instruments", 0.0) for m in ms if "instruments_later_total" not in m["stages"]
    )
    # GPU-held time of an evaluation: its wall time less the waits for its build and processes.
    gpu_held = later + sum(
        max(
            0.0,
            m["stages"].get("eval_total", 0.0)
            - m["stages"].get("eval_build_wait", 0.0)
            - m["stages"].get("eval_compile", 0.0),
        )
        for m in ms
    )
    return _share(instr, gpu_held)


#: An evaluation's stages whose medians the summary gives: its whole time, the wait for its sandboxed
#: processes on the critical path, their opening of the device, timing, and the wait for the GPU's turn
#: where workers share it.
MEDIAN_STAGES = ("eval_total", "eval_process_start", "eval_device_open", "eval_timing", "eval_turn_wait")


def stage_medians(ms: list[dict[str, Any]]) -> dict[str, float]:
    """The median of each of MEDIAN_STAGES over the measurements that recorded it."""
    out = {}
    for stage in MEDIAN_STAGES:
        values = [m["stages"][stage] for m in ms if isinstance(m["stages"].get(stage), (int, float))]
        if values:
            out[stage.removeprefix("eval_")] = round(statistics.median(values), 3)
    return out


def _excess(ms: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Per call, what the parent's clock saw beyond the kernel process's report, less the same for
    the reference (ms), over honest measurements: the allowance a GPU parent-clock bound needs."""
    xs = sorted(
        m["unaccounted_ms"]["kernel"] - m["unaccounted_ms"]["reference"]
        for m in ms
        if isinstance((m.get("unaccounted_ms") or {}).get("kernel"), (int, float))
        and isinstance(m["unaccounted_ms"].get("reference"), (int, float))
    )
    if not xs:
        return None
    return {
        "n": len(xs),
        "median": round(statistics.median(xs), 4),
        "p90": round(p90(xs), 4),
        "max": round(xs[-1], 4),
        "min": round(xs[0], 4),
    }


def _rate(ms: list[dict[str, Any]]) -> float | None:
    starts = [m["started_at"] for m in ms if m["started_at"]]
    ends = [m["finished_at"] for m in ms if m["finished_at"]]
    if not starts or not ends or max(ends) <= min(starts):
        return None
    return round(len(ms) / ((max(ends) - min(starts)) / 60), 2)


def _read(path: Path) -> str:
    return path.read_text(errors="replace") if path.exists() else ""


def _share(num: float, den: float) -> float | None:
    return round(num / den, 3) if den else None


def p90(values: list[float]) -> float:
    """The 90th percentile by nearest rank (a value the list holds)."""
    s = sorted(values)
    return s[min(len(s) - 1, math.ceil(0.9 * len(s)) - 1)]


def main(argv: list[str]) -> None:
    _setup()
    if argv[0] == "queue":
        queue(argv[1] if len(argv) > 1 else "")
    elif argv[0] == "wait":
        wait(float(argv[1]))
    elif argv[0] == "summary":
        out = Path(argv[1])
        table = rows()
        with_clocks(table, Path(argv[2]))
        selfchecks = (
            [json.loads(x) for x in Path(argv[3]).read_text().splitlines() if x.strip()]
            if Path(argv[3]).exists()
            else []
        )
        log = _read(Path(argv[4]))
        (out / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in table))
        s = {
            "commit": os.environ.get("GPU_CHECK_COMMIT", ""),
            "ran_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "device": os.environ.get("GPU_CHECK_DEVICE", ""),
            "workers_per_gpu": workers_started(log),
            **summary(table, Path(argv[2]), selfchecks, builds_from_log(log), job_seconds_from_log(log)),
            # The GPU exploit suite's last line (pytest), where the check ran it.
            "gpu_exploits": (
                [
                    x
                    for x in _read(out / "gpu_exploits.txt").splitlines()
                    if any(w in x for w in ("passed", "failed", "error", "exit "))
                ]
                or [None]
            )[-1],
        }
        (out / "summary.json").write_text(json.dumps(s, indent=1) + "\n")
        print(json.dumps(s, indent=1))
        # Last, the figures alone on one line each: a caller that keeps only the output's tail (the
        # device tool, when it cannot return the files) still has them.
        print("gpu_check summary:", json.dumps({k: v for k, v in s.items() if k != "selfchecks"}))
        for sc in s["selfchecks"]:
            print("gpu_check selfcheck:", json.dumps(sc))


if __name__ == "__main__":
    main(sys.argv[1:])
