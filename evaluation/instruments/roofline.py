"""The speed of light: the least time a problem can take on its hardware, and how close each kernel came.

Founded on the problem's least work, not on the reference's operators: every input read once, every
parameter and buffer read once, every output written once (their sizes in the run's precision),
found in the (trusted) reference process on the meta device (no memory, no time), else on the
device. Intermediates, re-reads and the L2 flush before each timed call are left out, so the true
traffic is at least this, whatever algorithm computes the outputs: a kernel that finds a cheaper
algorithm than the reference's (``diag(A) @ B`` as a row scaling) still reads its inputs and writes
its outputs. Arithmetic is not counted: the reference's operator count (its FLOPs) bounds the
reference's algorithm, not the problem, and counting it took seconds per kernel (torch's
``FlopCounterMode`` imports some 800 modules on first use).

The least time is bytes / peak bandwidth. For the bound that flags a kernel as **impossible** the
peak is the most the hardware can move: on a GPU its datasheet's memory bandwidth; on a CPU, a
copy's best bandwidth measured once per host (``copy_bandwidth``, over sizes from L1-resident to
DRAM, one thread), times the cores the evaluation may use, times ``CPU_SAFETY``: caches serve small
problems faster than DRAM, so the bound is generous on purpose. A reference that itself beats the
bound means the bound does not hold for that problem (an input the output does not need): then no
kernel is flagged.

The H200's figures (NVIDIA H200 Tensor Core GPU datasheet, SXM): HBM3e 4.8 TB/s. H100 SXM: 3.35 TB/s.
"""

from __future__ import annotations

import math
import os
import platform
from collections.abc import Callable
from typing import Any

from evaluation.sandbox.safe_files import read_json, replace_json

TERA = 1e12

#: hardware slug -> peaks (bytes/s); FLOP/s figures are kept for the record, not for the bound.
PEAKS: dict[str, dict[str, float]] = {
    "h200": {"bytes_per_s": 4.8 * TERA, "flops_per_s": 989.4 * TERA, "fp32_flops_per_s": 67 * TERA,
             "tf32_flops_per_s": 494.7 * TERA, "bf16_flops_per_s": 989.4 * TERA},
    "h100": {"bytes_per_s": 3.35 * TERA, "flops_per_s": 989.4 * TERA, "fp32_flops_per_s": 67 * TERA,
             "tf32_flops_per_s": 494.7 * TERA, "bf16_flops_per_s": 989.4 * TERA},
}
PEAK_SOURCE = "NVIDIA H200/H100 Tensor Core GPU datasheets (SXM, dense)"
#: A CPU's peak for the bound: its measured best copy bandwidth per core times the cores, times this.
CPU_SAFETY = 4.0
#: Sizes of the copies that measure a CPU's bandwidth (bytes): L1, L2, L3 and DRAM resident.
COPY_SIZES = (32 * 2**10, 256 * 2**10, 4 * 2**20, 64 * 2**20)


def _nbytes(torch: Any, values: Any) -> int:
    return int(sum(x.numel() * x.element_size() for x in values if isinstance(x, torch.Tensor)))


def _flat(out: Any) -> list[Any]:
    return list(out) if isinstance(out, (tuple, list)) else [out]


def _count(torch: Any, model: Any, inputs: list[Any]) -> dict[str, Any]:
    with torch.no_grad():
        out = model(*inputs)
    params = list(model.parameters()) + list(model.buffers()) if isinstance(model, torch.nn.Module) else []
    return {"input_bytes": _nbytes(torch, inputs), "param_bytes": _nbytes(torch, params),
            "output_bytes": _nbytes(torch, _flat(out))}


def minimum_work(torch: Any, problem: Any, cast: Any, device_run: Any) -> dict[str, Any]:
    """Bytes of one forward's inputs, parameters and outputs. Child side (reference process): on the
    meta device, else ``device_run()`` gives (model, inputs) on the device. ``cast`` casts a list to
    the run's precision."""
    try:
        torch.manual_seed(0)
        with torch.device("meta"):
            inputs = cast(list(problem.get_inputs()))
            model = problem.Model(*cast(list(problem.get_init_inputs())))
            if isinstance(model, torch.nn.Module):
                dtype = next((x.dtype for x in inputs if isinstance(x, torch.Tensor) and x.is_floating_point()), None)
                model = model.to(dtype) if dtype is not None and dtype != torch.float32 else model
            return {**_count(torch, model, inputs), "counted_on": "meta"}
    except Exception as exc:  # noqa: BLE001 - problem code that does not run on the meta device
        meta_error = f"{type(exc).__name__}: {str(exc)[:160]}"
    model, inputs = device_run()
    return {**_count(torch, model, inputs), "counted_on": "device", "meta_error": meta_error}


def copy_bandwidth(torch: Any, clock: Any) -> float:
    """A CPU's best copy bandwidth on one thread (bytes read plus written per second), over
    COPY_SIZES, best of several repeats each (child side; ``clock`` gives nanoseconds)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    best = 0.0
    try:
        for size in COPY_SIZES:
            src = torch.ones(size // 4, dtype=torch.float32)
            dst = torch.empty_like(src)
            reps = max(1, (8 * 2**20) // size)  # each timing moves at least 8 MiB: op overhead fades
            for _ in range(5):
                t0 = clock()
                for _ in range(reps):
                    dst.copy_(src)
                dt = (clock() - t0) / 1e9
                best = max(best, 2 * size * reps / max(dt, 1e-9))
    finally:
        torch.set_num_threads(threads)
    return best


def assess(work: dict[str, Any], kernel_ms: float | None, reference_ms: float | None,
           peaks: dict[str, float] | None) -> tuple[dict[str, Any], str | None]:
    """The speed-of-light record, and the impossible flag's message (parent side)."""
    nbytes = int(work.get("input_bytes", 0)) + int(work.get("param_bytes", 0)) + int(work.get("output_bytes", 0))
    record: dict[str, Any] = {"bytes": nbytes, **{k: work[k] for k in ("counted_on",) if k in work}}
    if not peaks:
        record["peaks"] = None
        return record, None
    sol_ms = nbytes / peaks["bytes_per_s"] * 1e3
    record.update(peaks=dict(peaks), sol_ms=sol_ms, bound="memory")
    for side, ms in (("kernel", kernel_ms), ("reference", reference_ms)):
        if ms is not None:  # a reported time of zero (or less) is the most impossible of all
            record[f"{side}_fraction"] = sol_ms / max(ms, 1e-9)
            record[f"{side}_bytes_per_s"] = nbytes / (max(ms, 1e-9) / 1e3)
    ker, ref = record.get("kernel_fraction"), record.get("reference_fraction")
    record["bound_holds"] = ref is None or ref <= 1.0
    record["impossible"] = bool(ker is not None and ker > 1.0 and record["bound_holds"] and sol_ms > 0)
    if not record["impossible"]:
        return record, None
    return record, (f"The kernel took {kernel_ms:.4g} ms, less than the {sol_ms:.4g} ms it takes to read the "
                    f"problem's inputs and write its outputs ({nbytes / 1e6:.3g} MB) at the hardware's peak "
                    f"bandwidth ({peaks['bytes_per_s'] / 1e9:.4g} GB/s): {ker:.2f} times the speed of light, "
                    "physically impossible for this work.")


def peaks_for(slug: str, override: dict[str, float] | None) -> dict[str, float] | None:
    """The peaks a result is judged by: the config's, else the GPU's datasheet (None for a CPU:
    see ``cpu_peaks``)."""
    if override:
        return dict(override)
    return PEAKS.get(slug)


#: The file, in the build cache's root, that keeps each host's measured copy bandwidth.
HOST_PEAKS_FILE = ".host_peaks.json"


def cpu_peaks(cache_dir: str, cpu: str, cores: int, measure: Callable[[], float]) -> dict[str, float] | None:
    """A CPU's peak bandwidth for the bound (parent side): the best one-thread copy bandwidth this
    host showed, measured once (``measure``, in the reference process) and kept in ``cache_dir``,
    times ``cores`` and CPU_SAFETY. None where the measurement gives nothing sane."""
    key = f"{platform.node()}|{cpu}"
    path = os.path.join(cache_dir, HOST_PEAKS_FILE)
    cached = read_json(path)
    entry = cached.get(key)
    per_core = entry.get("copy_bytes_per_s") if isinstance(entry, dict) else None
    if not isinstance(per_core, (int, float)) or not 1e8 <= per_core <= 1e13:
        per_core = measure()
        if not math.isfinite(per_core) or not 1e8 <= per_core <= 1e13:
            return None
        cached[key] = {"copy_bytes_per_s": per_core}
        replace_json(path, cached)
    return {"bytes_per_s": float(per_core) * max(1, cores) * CPU_SAFETY, "copy_bytes_per_s": float(per_core),
            "cores": float(max(1, cores)), "safety": CPU_SAFETY}
