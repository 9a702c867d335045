#!/usr/bin/env python3
"""How many kernels each of the reviewer's instruments flags, and what the instruments cost, from
the JSONL rows of ``python -m evaluation sweep ... --out FILE`` (each row an EvaluationResult).

    python benchmarks/instruments_figures.py RESULTS.jsonl [MORE.jsonl ...]

Prints one block: kernels, correct ones, each instrument flag's count (with the kernels it names),
the figures behind them (speed-of-light fraction, error against fp64, share of the tolerance used,
other-shape verdicts, GPU-busy share) and the instruments' time beside the evaluation's.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from typing import Any

INSTRUMENT_FLAGS = (
    "impossible_speed",
    "precision_downgrade",
    "shape_specialised",
    "nondeterministic",
    "near_tolerance",
)


def rows(paths: list[str]) -> list[dict[str, Any]]:
    out = []
    for path in paths:
        with open(path, encoding="utf-8") as fh:
            out += [json.loads(line) for line in fh if line.strip().startswith("{")]
    return [r for r in out if "status" in r]


def _q(xs: list[float]) -> str:
    if not xs:
        return "–"
    s = sorted(xs)
    return f"median {s[len(s) // 2]:.3g}, p90 {s[min(len(s) - 1, int(0.9 * len(s)))]:.3g}, max {s[-1]:.3g} (n={len(s)})"


def figures(results: list[dict[str, Any]]) -> str:
    correct = [r for r in results if r.get("status") == "correct"]
    lines = [f"kernels {len(results)}, correct {len(correct)}"]
    for code in INSTRUMENT_FLAGS:
        named = [
            f"L{r.get('level')}/{r.get('problem')}"
            for r in correct
            if code in {f.get("code") for f in r.get("flags") or []}
        ]
        lines.append(f"  {code:20s} {len(named):3d}  {', '.join(named[:12])}{' ...' if len(named) > 12 else ''}")
    ins = [r.get("instruments") or {} for r in correct]
    fig = {
        "speed-of-light fraction (kernel)": [
            i["speed_of_light"]["kernel_fraction"]
            for i in ins
            if isinstance(i.get("speed_of_light"), dict) and "kernel_fraction" in i["speed_of_light"]
        ],
        "speed-of-light fraction (reference)": [
            i["speed_of_light"]["reference_fraction"]
            for i in ins
            if isinstance(i.get("speed_of_light"), dict) and "reference_fraction" in i["speed_of_light"]
        ],
        "error vs fp64 / reference's": [
            i["precision"]["ratio"] for i in ins if isinstance(i.get("precision"), dict) and "ratio" in i["precision"]
        ],
        "share of tolerance used": [i["tolerance"]["worst_ratio"] for i in ins if isinstance(i.get("tolerance"), dict)],
        "GPU-busy share (kernel)": [
            i["profile"]["kernel"]["busy_share"]
            for i in ins
            if isinstance(i.get("profile"), dict)
            and isinstance(i["profile"].get("kernel"), dict)
            and i["profile"]["kernel"].get("busy_share") is not None
        ],
        "instruments s": [float((r.get("timings_s") or {}).get("instruments", 0.0)) for r in correct],
        "instruments / total": [
            float((r.get("timings_s") or {}).get("instruments", 0.0))
            / float((r.get("timings_s") or {}).get("total") or 1.0)
            for r in correct
        ],
    }
    lines += [f"  {name:36s} {_q(xs)}" for name, xs in fig.items()]
    verdicts = Counter(v.get("verdict") for i in ins for v in (i.get("shapes") or {}).get("variants") or [])
    skipped = Counter(
        f"{name}: {str(rec.get('skipped'))[:60]}"
        for i in ins
        for name, rec in i.items()
        if isinstance(rec, dict) and rec.get("skipped")
    )
    lines.append(f"  other-shape verdicts: {dict(verdicts)}")
    lines += [f"  skipped {n:3d}  {why}" for why, n in skipped.most_common(10)]
    per_step: dict[str, list[float]] = {}
    for i in ins:
        for step, s in (i.get("cost_s") or {}).items():
            per_step.setdefault(step, []).append(float(s))
    lines += [f"  cost of {step:16s} {_q(xs)} s" for step, xs in per_step.items()]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__)
        return 2
    print(figures(rows(argv)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
