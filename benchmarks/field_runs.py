"""Figures of the field's GPU runs, from what `benchmarks/gpu_field_verify.sh` brings back: what one
pass holds, what each device call did, and how two measurements of the same kernels compare.

    python3 benchmarks/field_runs.py pass RESULTS.jsonl
    python3 benchmarks/field_runs.py calls [BEFORE.jsonl] CALL_DIR [CALL_DIR ...]   # in the order they ran
    python3 benchmarks/field_runs.py compare RESULTS_A.jsonl RESULTS_B.jsonl
    python3 benchmarks/field_runs.py rounds RESULTS.jsonl [...]   # timed against device time, by calls a round
    python3 benchmarks/field_runs.py keep RESULTS.jsonl HARNESS > KEPT.jsonl   # only what that code measured
    python3 benchmarks/field_runs.py other-code RESULTS.jsonl [HARNESS]   # exits 1 if other code (default: this checkout's) measured any

A call's folder holds its `<card>_results.jsonl` (everything measured so far; h200 or h100), `evalworker.log` and
`gpu_util.csv`; a call's kernels are those its results file has and the previous call's (or
BEFORE.jsonl, what the first call started from) has not.
Reads only figures (no code); prints Markdown for docs/field.md. `keep` writes a results file of
the evaluations one code measured (`environment.harness`, evaluation.results.harness_id's digest): given to
`gpu_field_verify.sh` as FIELD_RESULTS, it has the others measured again by the code of the rest.
"""

from __future__ import annotations

import gzip
import json
import statistics
import sys
from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks.gpu_check import (  # noqa: E402
    EXPLOIT_FLAGS,
    builds_from_log,
    gpu_busy,
    job_seconds_from_log,
    p90,
)
from evaluation.results.harness_id import harness_digest  # noqa: E402
from evaluation.results.stats import speedup_gap, speedups_agree, speedups_within  # noqa: E402

Key = tuple[str, int, int]


def read_text(path: Path) -> str:
    """A raw file, or its gzipped copy: the older calls' raw output is kept compressed."""
    if path.exists():
        return path.read_text()
    return gzip.decompress(path.with_name(path.name + ".gz").read_bytes()).decode()


def load(path: Path) -> dict[Key, dict[str, Any]]:
    """The evaluations of a results file (its first line is the header), by kernel."""
    lines = read_text(path).splitlines()[1:]
    out = {}
    for line in lines:
        r = json.loads(line)
        k = r["kernel"]
        out[(k["source_hash"], k["level"], k["problem"])] = r["evaluation"]
    return out


def codes(items: list[Any] | None) -> set[str]:
    return {f.get("code", "") for f in items or [] if isinstance(f, dict)}


def pass_figures(evals: dict[Key, dict[str, Any]]) -> dict[str, Any]:
    """Verdicts, flags, the host-bound share and the code that measured them."""
    flags: Counter[str] = Counter()
    for e in evals.values():
        flags.update(codes(e.get("flags")))
    code = Counter(
        f"{(e.get('environment') or {}).get('harness') or '-'} ({(e.get('environment') or {}).get('harness_commit') or '-'})"
        for e in evals.values()
    )
    correct = [e for e in evals.values() if e.get("status") == "correct"]
    return {
        "evaluations": len(evals),
        "verdicts": dict(Counter(e.get("status") for e in evals.values()).most_common()),
        "flags": dict(flags.most_common()),
        "exploit flags": {f: n for f, n in flags.items() if f in EXPLOIT_FLAGS},
        "host-bound (of the correct)": f"{sum('host_bound' in codes(e.get('notes')) for e in correct)} of {len(correct)}",
        "code (harness digest, commit)": dict(code),
    }


def _epoch(stamp: str | None) -> float | None:
    return datetime.fromisoformat(stamp).timestamp() if stamp else None


def _median(values: list[float]) -> float | None:
    return round(statistics.median(values), 2) if values else None


#: A CUDA build's steps as ninja records them (the look-ahead builder's ``steps_s``), by file suffix.
BUILD_STEPS = {"the wrapper (main.o)": "main.o", "the .cu object": ".cuda.o", "the link": ".so"}


def build_step_figures(builds: list[dict[str, Any]]) -> dict[str, list[Any] | None]:
    """Median and p90 seconds of each step of the CUDA builds (the wrapper and the ``.cu`` object
    compile side by side: the longer is the build's critical path)."""
    out: dict[str, list[Any] | None] = {}
    for name, suffix in BUILD_STEPS.items():
        values = [v for b in builds for k, v in (b.get("steps_s") or {}).items() if k.endswith(suffix)]
        out[name] = [_median(values), round(p90(values), 1)] if values else None
    return out


def results_file(folder: Path) -> Path:
    """A call's results: the one ``<card>_results.jsonl`` its folder holds (h200, h100)."""
    found = sorted(folder.glob("h[0-9]00_results.jsonl"))
    if len(found) != 1:
        raise SystemExit(f"{folder}: expected one <card>_results.jsonl, found {[f.name for f in found]}")
    return found[0]


def call_figures(folder: Path, before: set[Key]) -> dict[str, Any]:
    """One device call: its kernels, its pace, its builds, the GPU's busy share and the instruments'."""
    evals = load(results_file(folder))
    new = [e for k, e in evals.items() if k not in before]
    log = read_text(folder / "evalworker.log")
    jobs = job_seconds_from_log(log)
    queued = [t for e in new if (t := _epoch(e.get("queued_at")))]
    finished = [t for e in new if (t := _epoch(e.get("finished_at")))]
    span = max(finished) - min(queued) if queued and finished else 0.0
    builds = builds_from_log(log)
    stages = [e.get("stage_seconds") or {} for e in new]
    busy = gpu_busy(folder / "gpu_util.csv", min(queued), max(finished)) if span else None
    return {
        "kernels measured": len(new),
        "first queued to last finished (s)": round(span),
        "kernels a minute over that span": round(len(new) / span * 60, 1) if span else None,
        "worker's evaluation jobs (s)": round(jobs["evaluation"], 1),
        "kernels a minute of the worker's jobs": round(len(new) / jobs["evaluation"] * 60, 1)
        if jobs["evaluation"]
        else None,
        "evaluation median: whole / process start / timing (s)": [
            _median([s[k] for s in stages if isinstance(s.get(k), (int, float))])
            for k in ("eval_total", "eval_process_start", "eval_timing")
        ],
        "waited for their build": sum((s.get("eval_build_wait") or 0) > 1 for s in stages),
        "CUDA builds: n / median / p90 (s)": [
            len(builds),
            _median([b["seconds"] for b in builds]),
            round(p90([b["seconds"] for b in builds]), 1) if builds else None,
        ],
        "builds with the shared headers": sum(bool(b.get("headers")) and b.get("headers") != "none" for b in builds),
        "CUDA build steps: median / p90 (s)": build_step_figures(builds),
        "GPU busy over that span": round(busy, 3) if busy is not None else None,
        "instruments' share of the worker's jobs": round(jobs["instruments"] / (sum(jobs.values()) or 1), 3),
    }


def compare(a: dict[Key, dict[str, Any]], b: dict[Key, dict[str, Any]]) -> dict[str, Any]:
    """Two measurements of the kernels both files hold: verdicts, the speedups' gaps and whether they
    agree by the site's rule (within 2 %, or a host-bound side's interval covers the other)."""
    both = sorted(set(a) & set(b))
    same = [k for k in both if a[k].get("status") == b[k].get("status")]
    pairs = [(a[k], b[k]) for k in same if speedup_gap(a[k].get("speedup"), b[k].get("speedup")) is not None]
    gaps = [speedup_gap(x["speedup"], y["speedup"]) or 0.0 for x, y in pairs]
    agree = [speedups_agree(x["speedup"], y["speedup"], _hb(x), _hb(y)) for x, y in pairs]
    device = [g for x, y in pairs if (g := speedup_gap(_device(x), _device(y))) is not None]
    disagreeing = {k for k in same if speedup_gap(a[k].get("speedup"), b[k].get("speedup")) is not None}
    disagreeing -= {k for k in disagreeing if speedups_agree(a[k]["speedup"], b[k]["speedup"], _hb(a[k]), _hb(b[k]))}
    return {
        "kernels in both": len(both),
        "same verdict": len(same),
        "verdicts that differ": [
            f"L{k[1]} {k[2]}: {a[k].get('status')} / {b[k].get('status')}" for k in both if k not in same
        ],
        "speedup pairs": len(pairs),
        "within 2 % / 5 %": [
            sum(speedups_within(x["speedup"], y["speedup"]) for x, y in pairs),
            sum(g <= 0.05 for g in gaps),
        ],
        "agree (2 %, or a host-bound interval covers the other)": sum(agree),
        "over 5 % and not covered": sum(g > 0.05 and not ok for g, ok in zip(gaps, agree, strict=True)),
        "over 5 % and not covered: which": [
            _pair_line(k, a[k], b[k])
            for k in same
            if k in disagreeing and (speedup_gap(a[k]["speedup"], b[k]["speedup"]) or 0.0) > 0.05
        ],
        "accusing flags that differ": [
            f"L{k[1]} {k[2]} {k[0][:8]}: {sorted(_accusing(a[k])) or '-'} / {sorted(_accusing(b[k])) or '-'}"
            for k in both
            if _accusing(a[k]) != _accusing(b[k])
        ],
        "gap median / p90 / max": [round(x, 4) for x in (statistics.median(gaps), p90(gaps), max(gaps))]
        if gaps
        else None,
        "pairs that do not agree: L level problem, speedups (device-time speedups)": [
            _pair_line(k, a[k], b[k]) for k in same if k in disagreeing
        ],
        "device-time speedups within 2 % / 5 % (of n)": [
            sum(g <= 0.02 for g in device),
            sum(g <= 0.05 for g in device),
            len(device),
        ],
    }


def _pair_line(k: Key, x: dict[str, Any], y: dict[str, Any]) -> str:
    def figure(e: dict[str, Any]) -> str:
        device = _device(e)
        return _times(e["speedup"]) + (f" ({_times(device)})" if device else "")

    return f"L{k[1]} {k[2]} {k[0][:8]}: {figure(x)} / {figure(y)}"


def _times(speedup: float) -> str:
    """2.00x, 123.40x; below 1x three figures (0.0244x), where two decimals would read 0.02x."""
    return f"{speedup:.2f}x" if speedup >= 1 else f"{speedup:#.3g}x"


def _accusing(e: dict[str, Any]) -> set[str]:
    return codes(e.get("flags")) & set(EXPLOIT_FLAGS)


def _hb(e: dict[str, Any]) -> list[Any] | None:
    return [e.get("speedup_low"), e.get("speedup_high")] if "host_bound" in codes(e.get("notes")) else None


def _device(e: dict[str, Any]) -> float | None:
    return ((e.get("reference_timing") or {}).get("device") or {}).get("speedup")


def keep(path: Path, harness: str) -> list[str]:
    """The results file's header and the lines whose evaluation that code measured."""
    header, *lines = read_text(path).splitlines()
    return [header] + [
        line for line in lines if (json.loads(line)["evaluation"].get("environment") or {}).get("harness") == harness
    ]


def other_code(path: Path, harness: str) -> Counter[str]:
    """How many results of the file each code other than ``harness`` measured (empty: one code)."""
    found: Counter[str] = Counter()
    for e in load(path).values():
        digest = (e.get("environment") or {}).get("harness") or "unknown"
        if digest != harness:
            found[digest] += 1
    return found


#: Calls a round, grouped as `rounds` prints them.
CALL_GROUPS = ((1, 2), (3, 4), (5, 9), (10, 49), (50, 10**6))


def rounds_figures(evaluations: list[dict[str, Any]]) -> dict[str, Any]:
    """Each side's timed figure against its device-time figure, by the calls its rounds held
    (median and p90 of the ratio), over the evaluations where neither side is host-bound: where the
    two agree, the timed calls hold no time of the host's."""
    ratios: dict[tuple[int, int], dict[str, list[float]]] = {g: {"reference": [], "kernel": []} for g in CALL_GROUPS}
    for e in evaluations:
        timing = e.get("reference_timing") or {}
        device = timing.get("device") or {}
        host_bound = device.get("host_bound") or {}
        if not device.get("reference_ms") or "host_bound" in codes(e.get("notes")) or any(host_bound.values()):
            continue
        group = next(g for g in CALL_GROUPS if g[0] <= timing["calls_per_round"] <= g[1])
        for side in ("reference", "kernel"):
            timed, held = e.get(f"{side}_ms"), device.get(f"{side}_ms")
            if timed and held:
                ratios[group][side].append(timed / held)
    out: dict[str, Any] = {}
    for (low, high), sides in ratios.items():
        if sides["reference"]:
            label = f"{low}-{high}" if high < 10**6 else f"{low}+"
            out[f"{label} calls a round: n, reference timed/device median p90, kernel's"] = [
                len(sides["reference"]),
                *(round(f(sides[s]), 3) for s in ("reference", "kernel") for f in (statistics.median, p90)),
            ]
    return out


def _print(title: str, figures: dict[str, Any]) -> None:
    print(f"\n### {title}\n\n| figure | value |\n| --- | --- |")
    for name, value in figures.items():
        print(f"| {name} | {value} |")


def main(argv: list[str]) -> None:
    if len(argv) < 2:
        raise SystemExit(__doc__)
    command, paths = argv[0], [Path(p) for p in argv[1:]]
    if command == "pass":
        _print(str(paths[0]), pass_figures(load(paths[0])))
    elif command == "calls":
        before: set[Key] = set(load(paths.pop(0))) if paths[0].suffix == ".jsonl" else set()
        for folder in paths:
            _print(str(folder), call_figures(folder, before))
            before = set(load(results_file(folder)))
    elif command == "compare":
        _print(f"{paths[0]} against {paths[1]}", compare(load(paths[0]), load(paths[1])))
    elif command == "rounds":
        _print(", ".join(map(str, paths)), rounds_figures([e for p in paths for e in load(p).values()]))
    elif command == "other-code":
        harness = argv[2] if len(argv) > 2 else harness_digest()
        found = other_code(paths[0], harness)
        if found:
            raise SystemExit(f"{paths[0]}: {sum(found.values())} result(s) of other code than {harness}: {dict(found)}")
    elif command == "keep":
        print("\n".join(keep(paths[0], argv[2])))
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
