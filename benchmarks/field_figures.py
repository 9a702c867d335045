"""The field's figures, measured here beside published: per model and level, kernels imported,
kernels measured here (the card of the results file), fast_1 measured here (over the level's problems, unmeasured kernels
counting as not fast) beside fast_1 published (L40S), and the published-correct kernels that fail here.

    python3 benchmarks/field_figures.py [data/field/kernelbench_leaderboard_figures.json] [data/field/h100_results.jsonl]

Reads only the two committed files (figures, no code); prints Markdown tables for docs/field.md.
"""

from __future__ import annotations

import json
import sys
from collections import Counter, defaultdict
from pathlib import Path

PROBLEMS_PER_LEVEL = {1: 100, 2: 100, 3: 50}


def main(figures_path: str, results_path: str) -> None:
    figures = json.load(open(figures_path))
    results = [json.loads(line) for line in open(results_path)][1:]
    measured = {
        (r["kernel"]["source_hash"], r["kernel"]["level"], r["kernel"]["problem"]): r["evaluation"] for r in results
    }
    names = {r["kernel"]["source_hash"]: r["kernel"]["model"] for r in results}
    by = defaultdict(lambda: Counter())
    failing = []
    for k in figures["kernels"]:
        key = (k["source_hash"], k["level"], k["problem"])
        cell = by[(k["model"], k["level"])]
        cell["imported"] += 1
        cell["fast1_published"] += (k["speedup_eager"] or 0) > 1
        ev = measured.get(key)
        if ev is None:
            continue
        cell["measured"] += 1
        cell["fast1_measured"] += bool(ev.get("correct")) and (ev.get("speedup") or 0) > 1
        cell["correct_here"] += bool(ev.get("correct"))
        if not ev.get("correct"):
            failing.append((names.get(k["source_hash"], k["model"]), k["level"], k["problem"], k["speedup_eager"], ev))
    card = Path(results_path).name.split("_", 1)[0].upper()  # h100_results.jsonl: measured on the H100
    print(
        f"| model (raw_data.json) | level | kernels imported | measured on {card} | correct here "
        f"| fast_1 published (L40S) | fast_1 measured ({card}) |"
    )
    print("| --- | --: | --: | --: | --: | --: | --: |")
    for (model, level), c in sorted(by.items(), key=lambda item: (item[0][1], item[0][0])):
        n = PROBLEMS_PER_LEVEL[level]
        print(
            f"| {model} | {level} | {c['imported']} | {c['measured']} | {c['correct_here']} | "
            f"{100 * c['fast1_published'] / n:.0f}% ({c['fast1_published']}) | {100 * c['fast1_measured'] / n:.0f}% ({c['fast1_measured']}) |"
        )
    print()
    print("| model | level | problem | published speedup | status here | flags |")
    print("| --- | --: | --: | --: | --- | --- |")
    for model, level, problem, claim, ev in sorted(failing, key=lambda f: (f[1], f[2])):
        flags = ",".join(f.get("code", "") if isinstance(f, dict) else str(f) for f in ev.get("flags") or [])
        print(f"| {model} | {level} | {problem} | {claim:.2f} | {ev.get('status')} | {flags} |")
    total = sum(c["measured"] for c in by.values())
    print(
        f"\n{total} of {len(figures['kernels'])} kernels measured; {len(failing)} published-correct kernels fail here."
    )


if __name__ == "__main__":
    main(*(sys.argv[1:] or ["data/field/kernelbench_leaderboard_figures.json", "data/field/h100_results.jsonl"]))
