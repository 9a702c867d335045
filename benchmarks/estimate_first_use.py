#!/usr/bin/env python3
"""What a problem's first size estimate costs a sandboxed reference process (docs/evaluation.md, "A
problem's sizes, found ahead of its evaluation"): on the CPU, for two catalogue problems, one process
each, the seconds to start (torch imported), then the ``estimate`` request twice (the first use of
the meta device, then again); one JSON line each.

    python benchmarks/estimate_first_use.py > benchmarks/results/estimate_first_use.jsonl
"""

from __future__ import annotations

import json
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from evaluation.sandbox.protocol import EstimateRequest  # noqa: E402
from evaluation.sandbox.sandbox import Sandbox  # noqa: E402

PROBLEMS = ("level1/3_GELU.py", "level2/1_Conv2d_BatchNorm_ReLU.py")


def measure(name: str) -> dict[str, object]:
    with open(os.path.join(ROOT, "problems", "catalogue", name), encoding="utf-8") as fh:
        source = fh.read()
    figures: dict[str, object] = {"problem": name}
    with Sandbox(device="cpu", size_scale=1, memory_limit_mb=8192) as sandbox:
        t0 = time.monotonic()
        proc = sandbox.spawn("reference", sandbox.write_source("problem.py", source))
        proc.recv(t0 + 120)
        figures["start_s"] = round(time.monotonic() - t0, 3)
        for label in ("estimate_first_s", "estimate_again_s"):
            t1 = time.monotonic()
            proc.request(EstimateRequest(), t1 + 120)
            figures[label] = round(time.monotonic() - t1, 3)
    return figures


if __name__ == "__main__":
    for problem in PROBLEMS:
        print(json.dumps(measure(problem)), flush=True)
