#!/usr/bin/env python3
"""Why do ConvTranspose3d problems read off 1.0 in their self-check? (H200, device tool)

    python3 benchmarks/gpu/ct3d_probe.py KB_PROBLEMS_DIR [--procs 5] [--problems level2/77_... ...]

For each problem, fresh processes one after another (never two on the GPU at once), each:
1. builds the model as the scoring library's child does (seeded, constructed on the GPU) and times
   30 calls on fixed inputs, L2 flushed before each call: its median ("as placed");
2. records the GPU kernels one forward launches (torch.profiler: names and durations), to tell a
   different algorithm (other kernel names) from the same kernels running slower;
3. re-places the model's parameters, buffers and inputs 8 times (a random-sized allocation first,
   then fresh copies) and times 10 calls per placement: if the medians move between placements of
   one process, where the tensors lie decides the speed, not the process.
Then two processes with ``torch.backends.cudnn.benchmark = True`` (cuDNN times its algorithms).
Prints one JSON object per process, then a summary line per problem.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

CHILD = r"""
import json, random, sys, types, torch
path, benchmark = sys.argv[1], sys.argv[2] == "1"
torch.backends.cudnn.benchmark = benchmark
src = open(path).read()
mod = types.ModuleType("p"); exec(compile(src, path, "exec"), mod.__dict__)
torch.set_grad_enabled(False)
l2 = torch.empty(128 * 2**20, dtype=torch.int8, device="cuda")
torch.manual_seed(1234)
with torch.device("cuda"):
    model = mod.Model(*mod.get_init_inputs())
    torch.manual_seed(42)
    inputs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in mod.get_inputs()]
s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
def one():
    l2.zero_(); torch.cuda.synchronize(); s.record(); model(*inputs); e.record(); torch.cuda.synchronize()
    return s.elapsed_time(e)
def med(n):
    ts = sorted(one() for _ in range(n)); return ts[len(ts) // 2]
for _ in range(3): one()
as_placed = med(30)
from torch.profiler import profile, ProfilerActivity
with profile(activities=[ProfilerActivity.CUDA]) as prof:
    model(*inputs); torch.cuda.synchronize()
kernels = [(ev.name[:90], round(ev.device_time_total / 1000.0, 4)) for ev in prof.events()
           if ev.device_time_total > 0 and not ev.cpu_children and ev.device_type.name == "CUDA"]
if not kernels:
    kernels = [(k.name[:90], round(k.duration / 1000.0, 4)) for ev in prof.events() for k in ev.kernels]
placements, keep = [], []
rng = random.Random()
for i in range(8):
    keep.append(torch.empty(rng.randint(1, 96) * 2**20 + rng.randint(0, 4095) * 512, dtype=torch.uint8, device="cuda"))
    for p in model.parameters():
        p.data = p.data.clone()
    for name, b in list(model.named_buffers()):
        owner = model.get_submodule(name.rpartition(".")[0]) if "." in name else model
        setattr(owner, name.rpartition(".")[2], b.clone())
    inputs = [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]
    for _ in range(2): one()
    placements.append(round(med(10), 4))
print(json.dumps({"as_placed_ms": round(as_placed, 4), "kernels": kernels, "placements_ms": placements,
                  "cudnn_benchmark": benchmark, "cudnn_version": torch.backends.cudnn.version(),
                  "allow_tf32": torch.backends.cudnn.allow_tf32}))
"""


def run_child(path: str, benchmark: bool) -> dict[str, object]:
    p = subprocess.run(
        [sys.executable, "-c", CHILD, path, "1" if benchmark else "0"], capture_output=True, text=True, timeout=300
    )
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
    if p.returncode or not lines:
        return {"error": (p.stderr or p.stdout)[-800:]}
    return json.loads(lines[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("kb_dir")
    ap.add_argument("--procs", type=int, default=5)
    ap.add_argument("--benchmark-procs", type=int, default=2)
    ap.add_argument(
        "--problems",
        nargs="+",
        default=[
            "level2/77_ConvTranspose3d_Scale_BatchNorm_GlobalAvgPool",
            "level1/68_conv_transposed_3D__square_input__asymmetric_kernel",
        ],
    )
    args = ap.parse_args()
    for prob in args.problems:
        path = os.path.join(args.kb_dir, prob + ".py")
        rows = []
        for i in range(args.procs + args.benchmark_procs):
            r = run_child(path, benchmark=i >= args.procs)
            r.update(problem=prob, process=i)
            rows.append(r)
            print(json.dumps(r), flush=True)
        plain = [r for r in rows if "as_placed_ms" in r and not r["cudnn_benchmark"]]
        kernel_sets = {tuple(n for n, _ in r["kernels"]) for r in plain}
        spread = [p for r in plain for p in r["placements_ms"]]
        print(
            json.dumps(
                {
                    "summary": prob,
                    "as_placed_ms": [r["as_placed_ms"] for r in plain],
                    "distinct_kernel_sets": len(kernel_sets),
                    "placement_range_within_process": [
                        round(max(r["placements_ms"]) / min(r["placements_ms"]), 4) for r in plain
                    ],
                    "placements_median": statistics.median(spread) if spread else None,
                    "benchmark_as_placed_ms": [r.get("as_placed_ms") for r in rows if r.get("cudnn_benchmark")],
                }
            ),
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
