"""A deliberately naive, KernelBench-style harness, used only to show that each exploit kernel
fools a harness without our defences. Everything runs in ONE process: problem and kernel share
torch, the same input tensors are reused for every call, outputs are compared at the end, and
time is read with time.perf_counter (CPU) or CUDA events on the current stream (GPU).

Run as a subprocess (exploits patch the interpreter): python naive_harness.py PROBLEM KERNEL [opts]
Prints one JSON line: {"correct": bool, "speedup": float, "ref_ms": float, "kernel_ms": float}.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import types


def load(path: str, name: str) -> types.ModuleType:
    mod = types.ModuleType(name)
    mod.__file__ = path
    sys.modules[name] = mod
    exec(compile(open(path).read(), path, "exec"), mod.__dict__)
    return mod


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("problem")
    ap.add_argument("kernel")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--order", choices=["ref-first", "kernel-first"], default="ref-first")
    ap.add_argument("--free-ref", action="store_true", help="free the reference output before the kernel runs")
    ap.add_argument("--calls", type=int, default=10)
    ap.add_argument("--atol", type=float, default=1e-4)
    ap.add_argument("--settle", type=float, default=0.0, help="seconds to wait before comparing")
    args = ap.parse_args()

    import torch

    torch.set_grad_enabled(False)
    torch.set_num_threads(1)
    problem = load(args.problem, "naive_problem")
    kernel = load(args.kernel, "naive_kernel")  # any import-time patches now apply to everything
    dev = args.device
    torch.manual_seed(42)
    init = problem.get_init_inputs()
    torch.manual_seed(42)
    model = problem.Model(*init).to(dev)
    torch.manual_seed(42)
    new = kernel.ModelNew(*init).to(dev)
    torch.manual_seed(1)
    inputs = [x.to(dev) if isinstance(x, torch.Tensor) else x for x in problem.get_inputs()]

    if args.order == "ref-first":
        ref_out = model(*inputs)
        if args.free_ref:
            ref_keep = ref_out.cpu()
            del ref_out
            ref_out = None
        new_out = new(*inputs)
    else:
        new_out = new(*inputs)
        ref_out = model(*inputs)
    if dev == "cuda":
        torch.cuda.synchronize()

    def timed(fn) -> float:
        times = []
        for _ in range(args.calls):
            if dev == "cuda":
                s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                s.record()
                fn(*inputs)
                e.record()
                torch.cuda.synchronize()
                times.append(s.elapsed_time(e))
            else:
                t0 = time.perf_counter()
                fn(*inputs)
                times.append((time.perf_counter() - t0) * 1e3)
        times.sort()
        return times[len(times) // 2]

    kernel_ms = timed(new)
    ref_ms = timed(model)
    time.sleep(args.settle)
    if ref_out is None:
        ref_out = ref_keep.to(dev)
    correct = bool(torch.allclose(new_out.to(ref_out.device), ref_out, atol=args.atol, rtol=args.atol))
    print(
        json.dumps(
            {"correct": correct, "speedup": ref_ms / max(kernel_ms, 1e-9), "ref_ms": ref_ms, "kernel_ms": kernel_ms}
        )
    )


if __name__ == "__main__":
    main()
