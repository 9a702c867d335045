#!/usr/bin/env python3
"""The instruments' cost on the CPU: the reference as its own kernel on five catalogue problems; one
JSON line each with timings_s and instruments["cost_s"] (docs/evaluation.md, "Instruments").

    python benchmarks/instruments_cpu_cost.py > benchmarks/results/instruments_cpu_cost.jsonl
"""

from __future__ import annotations

import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from evaluation import EvaluationConfig, evaluate  # noqa: E402

SELF = "\n\nclass ModelNew(Model):\n    pass\n"
PROBLEMS = (
    "level1/1_Square_matrix_multiplication.py",
    "level1/7_LayerNorm.py",
    "level2/2_Matmul_Bias_GELU_Scale.py",
    "level3/2_Small_CNN.py",
    "level4/1_Transformer_block.py",
)


def main() -> None:
    for name in PROBLEMS:
        with open(os.path.join(ROOT, "problems", "catalogue", name), encoding="utf-8") as fh:
            src = fh.read()
        r = evaluate(src, src + SELF, EvaluationConfig(seed=1, cpu_threads=1, timeout_s=300))
        t, ins = r.timings_s, r.instruments
        print(
            json.dumps(
                {
                    "problem": os.path.basename(name),
                    "status": r.status,
                    "flags": r.flag_codes,
                    "instruments_s": t.get("instruments"),
                    "correctness_s": t.get("correctness"),
                    "timing_s": t.get("timing"),
                    "total_s": t.get("total"),
                    "cost_s": ins.get("cost_s"),
                    "shapes": [(v["label"], v["verdict"]) for v in ins.get("shapes", {}).get("variants", [])],
                    "sizes": ins.get("shapes", {}).get("sizes"),
                    "precision_ratio": ins.get("precision", {}).get("ratio"),
                    "precision": ins.get("precision", {}).get("skipped"),
                    "flops": ins.get("speed_of_light", {}).get("flops"),
                }
            ),
            flush=True,
        )


if __name__ == "__main__":
    main()
