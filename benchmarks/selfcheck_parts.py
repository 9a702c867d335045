"""The 250-problem self-check (each KernelBench reference of levels 1-3 against itself) measured in
parts: which problems are left, and what the parts measured together.

    python3 benchmarks/selfcheck_parts.py remaining KERNELBENCH_DIR DONE_DIR   # globs for `sweep --problems`
    python3 benchmarks/selfcheck_parts.py summary DONE_DIR [PART.jsonl ...]    # Markdown for docs/field.md
    python3 benchmarks/selfcheck_parts.py outside DONE_DIR                     # names outside 2 % of 1.0
    python3 benchmarks/selfcheck_parts.py compare BEFORE_DIR AFTER_DIR         # the problems both measured

DONE_DIR holds the parts committed so far (`*.jsonl`, or `*.jsonl.gz`), each line one result of
`python -m evaluation sweep --json --out`. A problem whose result was no verdict (the host's
failure: `infrastructure_error`) is left to be measured again; the last line of a problem counts.
"""

from __future__ import annotations

import glob
import json
import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from benchmarks.field_runs import read_text  # noqa: E402

LEVELS = (1, 2, 3)
WITHIN = 0.02  # the bound on |speedup - 1|


def problems(kb_dir: str) -> list[str]:
    """``levelL/NAME`` of every problem of levels 1-3, in KernelBench's order."""
    base = os.path.join(kb_dir, "KernelBench") if os.path.isdir(os.path.join(kb_dir, "KernelBench")) else kb_dir
    names = []
    for level in LEVELS:
        files = glob.glob(os.path.join(base, f"level{level}", "*.py"))
        names += [f"level{level}/{os.path.basename(f)[:-3]}" for f in sorted(files, key=_number)]
    return names


def _number(path: str) -> tuple[int, str]:
    head = os.path.basename(path).split("_", 1)[0]
    return (int(head) if head.isdigit() else 10**6, path)


def results(paths: list[str]) -> dict[str, dict[str, Any]]:
    """``levelL/NAME`` -> its last result with a verdict, over the files in the order given."""
    found: dict[str, dict[str, Any]] = {}
    for path in paths:
        for line in read_text(Path(path.removesuffix(".gz"))).splitlines():
            if line.strip():
                row = json.loads(line)
                if row.get("status") != "infrastructure_error":
                    found[f"level{row['level']}/{row['problem']}"] = row
    return found


def done_files(done_dir: str) -> list[str]:
    return sorted(glob.glob(os.path.join(done_dir, "*.jsonl")) + glob.glob(os.path.join(done_dir, "*.jsonl.gz")))


def remaining(kb_dir: str, done_dir: str) -> list[str]:
    done = results(done_files(done_dir))
    return [name for name in problems(kb_dir) if name not in done]


def summary(rows: dict[str, dict[str, Any]]) -> list[tuple[str, Any]]:
    """The figures the issue names: correct, within 2 %, intervals covering 1.0, the worst."""
    speedups = {name: r for name, r in rows.items() if r.get("speedup")}
    within = [n for n, r in speedups.items() if abs(r["speedup"] - 1) <= WITHIN]
    covers = [n for n, r in speedups.items() if _covers_one(r.get("speedup_interval"))]
    outside = sorted((n for n in speedups if n not in within and n not in covers),
                     key=lambda n: -abs(speedups[n]["speedup"] - 1))  # fmt: skip
    return [
        ("problems measured", f"{len(rows)} of 250"),
        ("correct", sum(1 for r in rows.values() if r.get("status") == "correct")),
        ("within 2 % of 1.0", f"{len(within)} of {len(speedups)}"),
        ("95 % interval covers 1.0", f"{len(covers)} of {len(speedups)}"),
        ("neither", [f"{n} {speedups[n]['speedup']:.3f}" for n in outside]),
    ]


def _covers_one(interval: Any) -> bool:
    return bool(interval) and interval[0] <= 1.0 <= interval[1]


def outside(rows: dict[str, dict[str, Any]]) -> list[str]:
    """The problems whose speedup is more than 2 % from 1.0, in KernelBench's order."""
    return [n for n, r in rows.items() if r.get("speedup") and abs(r["speedup"] - 1) > WITHIN]


def compare(before: dict[str, dict[str, Any]], after: dict[str, dict[str, Any]]) -> list[str]:
    """Markdown: on the problems both measured, within 2 % before and after, and each one outside
    2 % in either with its speedup and calls per round (the round's figure depends on them)."""
    both = [n for n in before if n in after and before[n].get("speedup") and after[n].get("speedup")]
    within = {k: sum(1 for n in both if abs(rows[n]["speedup"] - 1) <= WITHIN) for k, rows in
              (("before", before), ("after", after))}  # fmt: skip
    lines = [f"{len(both)} problems measured by both: within 2 % before {within['before']}, after {within['after']}",
             "", "| problem | before: speedup (calls/round) | after |", "| --- | --: | --: |"]  # fmt: skip
    for name in both:
        if abs(before[name]["speedup"] - 1) > WITHIN or abs(after[name]["speedup"] - 1) > WITHIN:
            lines.append(f"| {name} | {_figure(before[name])} | {_figure(after[name])} |")
    return lines


def _figure(row: dict[str, Any]) -> str:
    calls = (row.get("reference_ms") or {}).get("calls_per_round", "?")
    return f"{row['speedup']:.3f} ({calls})"


def main(argv: list[str]) -> int:
    if len(argv) >= 3 and argv[0] == "remaining":
        print(" ".join(remaining(argv[1], argv[2])))
        return 0
    if len(argv) >= 2 and argv[0] == "summary":
        rows = results(done_files(argv[1]) + argv[2:])
        print("| figure | value |\n| --- | --- |")
        for name, value in summary(rows):
            print(f"| {name} | {value} |")
        return 0
    if len(argv) == 2 and argv[0] == "outside":
        print(" ".join(outside(results(done_files(argv[1])))))
        return 0
    if len(argv) == 3 and argv[0] == "compare":
        print("\n".join(compare(results(done_files(argv[1])), results(done_files(argv[2])))))
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
