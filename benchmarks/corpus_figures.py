"""Figures of the real-kernel corpus through the sweep (benchmarks/results/h200_corpus/), and the
projection for a 250-kernel CUDA run on larger hosts.

    python benchmarks/corpus_figures.py [RESULTS_DIR]

Per run file (``*_new.jsonl``: the build pool; ``*_old.jsonl``: the code before it): statuses, how
long each evaluation held its GPU (its wall time in the worker minus the time it waited for the pool
to finish its build), build seconds per kernel, waits. The projection assumes what was measured on
the 16-core, 1-GPU machine: a build costs the same core-seconds on a larger host, the build pool
gets every core but one timing core and one worker core per GPU, and each GPU holds an evaluation
for the measured mean.
"""

from __future__ import annotations

import glob
import json
import math
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, math.ceil(q * len(s)) - 1))] if s else math.nan


def held_and_wait(r: dict) -> tuple[float, float]:
    t = r.get("timings_s") or {}
    wait = t.get("build_wait")
    if wait is None:  # runs before build_wait was recorded: what the phases do not account for
        wait = max(
            0.0,
            t.get("total", 0.0)
            - sum(t.get(k, 0.0) for k in ("process_start", "load", "correctness", "timing", "compile")),
        )
    return t.get("total", 0.0) - wait, wait


def describe(path: str) -> dict:
    rows = [json.loads(line) for line in open(path, encoding="utf-8") if line.strip()]
    held = [held_and_wait(r)[0] for r in rows]
    builds = [r["prebuild"]["seconds"] for r in rows if (r.get("prebuild") or {}).get("status") == "built"]
    statuses: dict[str, int] = {}
    for r in rows:
        statuses[r["status"]] = statuses.get(r["status"], 0) + 1
    return {
        "file": os.path.basename(path),
        "evaluations": len(rows),
        "statuses": statuses,
        "held_median_s": statistics.median(held),
        "held_p90_s": pct(held, 0.9),
        "held_mean_s": statistics.mean(held),
        "held_sum_s": sum(held),
        "wait_sum_s": sum(held_and_wait(r)[1] for r in rows),
        "builds": len(builds),
        "build_median_s": statistics.median(builds) if builds else None,
        "build_p90_s": pct(builds, 0.9) if builds else None,
        "compiled_in_evaluation": sum("compile" in (r.get("timings_s") or {}) for r in rows),
        "found_built": sum(bool(r.get("build_cached")) for r in rows),
    }


def project(
    n: int, gpus: int, cores: int, held_mean_s: float, builds_per_core_min: float, first_build_s: float
) -> dict:
    """Wall minutes of n CUDA kernels: the slower of the build pool and the GPUs, plus the first build."""
    build_cores = cores - 2 * gpus
    build_min = n / (builds_per_core_min * build_cores)
    gpu_min = n * held_mean_s / 60.0 / gpus
    wall = max(build_min, gpu_min) + first_build_s / 60.0
    return {
        "gpus": gpus,
        "cores": cores,
        "build_min": round(build_min, 1),
        "gpu_min": round(gpu_min, 1),
        "wall_min": round(wall, 1),
        "gpu_busy": round(gpu_min / wall, 2),
    }


def main() -> None:
    results = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "results", "h200_corpus")
    runs = {os.path.basename(p): describe(p) for p in sorted(glob.glob(os.path.join(results, "*_*.jsonl")))}
    for d in runs.values():
        print(json.dumps(d))
    new = [runs[k] for k in runs if k.endswith("_new.jsonl")]
    held = [
        held_and_wait(json.loads(line))[0]
        for k in runs
        if k.endswith("_new.jsonl")
        for line in open(os.path.join(results, k), encoding="utf-8")
        if line.strip()
    ]
    held_mean = statistics.mean(held)
    print(
        json.dumps(
            {
                "corpus_new": {
                    "evaluations": len(held),
                    "held_median_s": statistics.median(held),
                    "held_p90_s": pct(held, 0.9),
                    "held_mean_s": held_mean,
                }
            }
        )
    )
    # Build throughput measured with 11 build processes on the 16-core machine (14 cores for builds).
    eleven = [d for d in new if d["file"] in ("C_new.jsonl", "D_new.jsonl")]
    per_build = statistics.median([d["build_median_s"] for d in eleven])
    per_core_min = 11 / (per_build / 60.0) / 14
    for gpus, cores in ((1, 16), (2, 32), (8, 128)):
        print(json.dumps({"projection_250_cuda": project(250, gpus, cores, held_mean, per_core_min, per_build)}))
    old = runs.get("A_old.jsonl")
    if old:
        per_kernel = old["held_sum_s"] / old["evaluations"]
        print(
            json.dumps(
                {
                    "before_250_cuda": {g: round(250 * per_kernel / 60.0 / g, 1) for g in (1, 2, 8)},
                    "before_per_kernel_s": round(per_kernel, 1),
                }
            )
        )


if __name__ == "__main__":
    main()
