#!/usr/bin/env python3
"""Self-check of the scoring library on the starter catalogue.

For every problem: the reference evaluated as its own kernel must give a speedup in [0.9, 1.1]
with a 95% interval covering 1.0, and a kernel that does the work twice must give about 0.5x.

    python benchmarks/evaluation_selfcheck.py                       # CPU, KB_SCALE=1
    python benchmarks/evaluation_selfcheck.py --device cuda --gpu-scale   # each file's H200 scale
    python benchmarks/evaluation_selfcheck.py --json out.json --problems 'level1/*'

Prints one table (last) and, with --json, writes every result.
"""

from __future__ import annotations

import argparse
import fnmatch
import glob
import json
import os
import re
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from evaluation import EvaluationConfig, evaluate  # noqa: E402

SELF = "\n\nclass ModelNew(Model):\n    pass\n"
TWICE = (
    "\n\nclass ModelNew(Model):\n    def forward(self, *args):\n        Model.forward(self, *args)\n"
    "        return Model.forward(self, *args)\n"
)


def gpu_scale(src: str) -> int:
    m = re.search(r"H200 use KB_SCALE=(\d+)", src) or re.search(r"KB_SCALE=(\d+)", src)
    return int(m.group(1)) if m else 1


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--problems", default="level*/*.py", help="glob under problems/catalogue")
    ap.add_argument("--scale", type=int, default=None, help="KB_SCALE for every problem")
    ap.add_argument("--gpu-scale", action="store_true", help="use each file's 'On an H200 use KB_SCALE=N'")
    ap.add_argument("--timing-trials", type=int, default=20)
    ap.add_argument("--correctness-trials", type=int, default=3)
    ap.add_argument("--round-target", type=float, default=0.05, help="seconds of kernel time per timed round")
    ap.add_argument("--cpu-threads", type=int, default=None)
    ap.add_argument("--no-twice", action="store_true")
    ap.add_argument("--twice-only", default="*", help="glob: run the 'twice' kernel only for these problems")
    ap.add_argument("--json", default=None)
    return ap.parse_args()


def check_problem(args: argparse.Namespace, path: str, rows: list[tuple], raw: list[dict]) -> None:
    """Evaluate one problem's reference as its own kernel (and, unless left out, the 'twice' kernel);
    append its table row to `rows`, its results to `raw`, and print one line."""
    src = open(path).read()
    name = os.path.relpath(path, os.path.join(ROOT, "problems", "catalogue"))
    scale = args.scale or (gpu_scale(src) if args.gpu_scale else 1)
    cfg = dict(
        device=args.device,
        timing_trials=args.timing_trials,
        correctness_trials=args.correctness_trials,
        size_scale=scale,
        round_target_s=args.round_target,
        timeout_s=600,
        cpu_threads=args.cpu_threads,
        memory_limit_mb=65536,
    )
    t0 = time.monotonic()
    same = evaluate(src, src + SELF, EvaluationConfig(**cfg))
    t_same = time.monotonic() - t0
    twice = None
    if not args.no_twice and fnmatch.fnmatch(name, args.twice_only):
        twice = evaluate(src, src + TWICE, EvaluationConfig(**cfg))
    raw.append({"problem": name, "scale": scale, "self": same.to_dict(), "twice": twice and twice.to_dict()})
    s = same.speedup
    lo, hi = same.speedup_interval or (None, None)
    ok = same.status == "correct" and s is not None and 0.9 <= s <= 1.1 and lo <= 1.0 <= hi
    tw_ok = twice is None or (twice.status == "correct" and twice.speedup is not None and 0.4 <= twice.speedup <= 0.6)
    rows.append(
        (
            name,
            scale,
            same.status,
            s,
            lo,
            hi,
            same.reference_ms and same.reference_ms["median"],
            twice and twice.speedup,
            "ok" if ok and tw_ok else "CHECK",
            t_same,
            [f["code"] for f in same.flags if f["code"] != "fallback_to_reference"],
        )
    )
    print(
        f"{name}: self {s} [{lo}, {hi}] twice {twice and twice.speedup} ({t_same:.1f}s) {same.error or ''}",
        flush=True,
    )


def print_table(rows: list[tuple]) -> None:
    print()
    print("| problem | KB_SCALE | status | self speedup | 95% CI | ref ms | twice | verdict | eval s | flags |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for name, scale, status, s, lo, hi, ref_ms, tw, verdict, t, flags in rows:
        f = lambda v, d=3: "-" if v is None else f"{v:.{d}f}"  # noqa: E731
        print(
            f"| {name} | {scale} | {status} | {f(s)} | {f(lo)}-{f(hi)} | {f(ref_ms, 4)} | {f(tw)} | {verdict} | "
            f"{t:.1f} | {' '.join(flags) or '-'} |"
        )
    bad = sum(1 for r in rows if r[8] != "ok")
    print(f"\n{len(rows) - bad}/{len(rows)} problems pass the self-check")


def main() -> int:
    args = parse_args()
    files = sorted(glob.glob(os.path.join(ROOT, "problems", "catalogue", args.problems)))
    files = [f for f in files if not os.path.basename(f).startswith("_")]
    rows: list[tuple] = []
    raw: list[dict] = []
    for path in files:
        check_problem(args, path, rows, raw)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(raw, fh, indent=1, default=str)
    print_table(rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
