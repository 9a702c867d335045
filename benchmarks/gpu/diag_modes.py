#!/usr/bin/env python3
"""Where do per-process speed modes on launch-bound problems come from? (H200, device tool)

    python3 benchmarks/gpu/diag_modes.py KB_DIR [--problem level3/9_ResNet18.py] [--procs 6]

1. the machine: cores, NUMA nodes, the GPU's NUMA node and local cores, CPU frequency governor;
2. one process, its main thread pinned to each core in turn: median time per core;
3. fresh processes, unpinned: median and min per process, and the cores the thread ran on;
4. fresh processes, each pinned to the same core: median and min per process.
Prints one JSON object per line.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import subprocess
import sys
import time

CHILD = r"""
import ctypes, json, os, sys, types, torch
libc = ctypes.CDLL("libc.so.6")
pin = sys.argv[2]
if pin != "none":
    os.sched_setaffinity(0, {int(pin)})
src = open(sys.argv[1]).read()
mod = types.ModuleType("p"); exec(compile(src, sys.argv[1], "exec"), mod.__dict__)
torch.manual_seed(0)
with torch.device("cuda"):
    model = mod.Model(*mod.get_init_inputs())
    inputs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in mod.get_inputs()]
torch.set_grad_enabled(False)
s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
def one():
    torch.cuda.synchronize(); s.record(); model(*inputs); e.record(); torch.cuda.synchronize()
    return s.elapsed_time(e)
for _ in range(5): one()
mode = sys.argv[3]
if mode == "percore":
    out = {}
    for c in sorted(os.sched_getaffinity(0)):
        os.sched_setaffinity(0, {c})
        for _ in range(3): one()
        ts = sorted(one() for _ in range(25))
        out[c] = ts[len(ts) // 2]
    print(json.dumps({"percore_median_ms": out}))
else:
    ts, cpus = [], set()
    for _ in range(int(sys.argv[4])):
        ts.append(one()); cpus.add(libc.sched_getcpu())
    ts.sort()
    print(json.dumps({"pin": pin, "median_ms": ts[len(ts) // 2], "min_ms": ts[0], "p90_ms": ts[int(0.9 * len(ts))],
                      "cpus_seen": sorted(cpus), "cudnn_benchmark": torch.backends.cudnn.benchmark,
                      "tf32_cudnn": torch.backends.cudnn.allow_tf32, "tf32_matmul": torch.backends.cuda.matmul.allow_tf32}))
"""


def sh(cmd: str) -> str:
    return subprocess.run(cmd, shell=True, capture_output=True, text=True).stdout.strip()


def machine() -> dict:
    info = {
        "nproc": os.cpu_count(),
        "affinity": sorted(os.sched_getaffinity(0)),
        "nodes": {
            os.path.basename(n): open(os.path.join(n, "cpulist")).read().strip()
            for n in glob.glob("/sys/devices/system/node/node*")
        },
        "governor": sh("cat /sys/devices/system/cpu/cpu0/cpufreq/scaling_governor 2>/dev/null"),
        "model": sh("grep -m1 'model name' /proc/cpuinfo"),
        "mhz": sh("grep MHz /proc/cpuinfo | head -32 | awk '{print $4}' | tr '\\n' ' '"),
        "topo": sh("nvidia-smi topo -m 2>&1 | head -8"),
        "smi": sh("nvidia-smi --query-gpu=index,pci.bus_id,clocks.sm,clocks.max.sm --format=csv"),
    }
    for bus in sh("nvidia-smi --query-gpu=pci.bus_id --format=csv,noheader").split():
        d = "/sys/bus/pci/devices/" + bus.lower()[-12:]
        info[f"gpu_{bus}"] = {"numa_node": sh(f"cat {d}/numa_node"), "local_cpulist": sh(f"cat {d}/local_cpulist")}
    info["threads_siblings_cpu0"] = sh("cat /sys/devices/system/cpu/cpu0/topology/thread_siblings_list")
    return info


def child(problem: str, pin: str, mode: str, calls: int = 100) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", CHILD, problem, pin, mode, str(calls)],
        capture_output=True,
        text=True,
        env={**os.environ, "CUDA_VISIBLE_DEVICES": os.environ.get("CUDA_VISIBLE_DEVICES", "0")},
    )
    try:
        return json.loads(out.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        return {"error": out.stderr[-800:]}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("kb_dir")
    ap.add_argument("--problem", action="append", default=None)
    ap.add_argument("--procs", type=int, default=6)
    ap.add_argument("--pin", default="2")
    a = ap.parse_args()
    print(json.dumps({"machine": machine()}), flush=True)
    for prob in a.problem or ["level3/9_ResNet18.py"]:
        path = (
            os.path.join(a.kb_dir, "KernelBench", prob)
            if os.path.isdir(os.path.join(a.kb_dir, "KernelBench"))
            else os.path.join(a.kb_dir, prob)
        )
        t0 = time.time()
        print(json.dumps({"problem": prob, "percore": child(path, "none", "percore")}), flush=True)
        for pin in ("none", a.pin):
            rows = [child(path, pin, "procs", 150) for _ in range(a.procs)]
            print(json.dumps({"problem": prob, "pin": pin, "procs": rows}), flush=True)
        print(json.dumps({"problem": prob, "seconds": round(time.time() - t0, 1)}), flush=True)


if __name__ == "__main__":
    main()
