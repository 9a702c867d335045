"""The speed of light: the least time a problem can take on a GPU, and how close each kernel came.

Minimum work, found in the (trusted) reference process:

- **bytes**: every input read once, every parameter and buffer read once, every output written
  once (their sizes in the run's precision). Intermediates, re-reads and the L2 flush before each
  timed call are left out, so the true traffic is at least this.
- **FLOPs**: ``torch.utils.flop_counter.FlopCounterMode`` around one forward of the reference,
  first on the meta device (no memory, no time), else on the device with real inputs. It counts
  the operators it has formulas for (matmul, mm/bmm/addmm/baddbmm, convolutions, attention) and
  counts everything else (elementwise, reductions, norms) as zero: a lower bound.

The least time is max(bytes / peak bandwidth, FLOPs / peak arithmetic). For the bound that flags a
kernel as **impossible** the peaks are the most the GPU can do in any precision that could pass
(bf16/fp16 dense tensor cores, HBM), so no honest kernel exceeds them; the record also gives the
kernel's share of the peaks of its own precision (fp32 without and with TF32 tensor cores). A
reference that itself beats the bound means the bound does not hold for that problem (an input the
output does not need): then no kernel is flagged.

The H200's figures (NVIDIA H200 Tensor Core GPU datasheet, SXM, dense, i.e. half the sparsity
figures): HBM3e 4.8 TB/s; FP32 67 TFLOP/s; TF32 tensor 494.7 TFLOP/s; BF16/FP16 tensor 989.4
TFLOP/s; FP64 tensor 67 TFLOP/s. H100 SXM: 3.35 TB/s; 67; 494.7; 989.4.
"""

from __future__ import annotations

from typing import Any

TERA = 1e12

#: hardware slug -> peaks (bytes/s and FLOP/s); "flops_per_s" is the bound for the impossible flag.
PEAKS: dict[str, dict[str, float]] = {
    "h200": {"bytes_per_s": 4.8 * TERA, "flops_per_s": 989.4 * TERA, "fp32_flops_per_s": 67 * TERA,
             "tf32_flops_per_s": 494.7 * TERA, "bf16_flops_per_s": 989.4 * TERA},
    "h100": {"bytes_per_s": 3.35 * TERA, "flops_per_s": 989.4 * TERA, "fp32_flops_per_s": 67 * TERA,
             "tf32_flops_per_s": 494.7 * TERA, "bf16_flops_per_s": 989.4 * TERA},
}
PEAK_SOURCE = "NVIDIA H200/H100 Tensor Core GPU datasheets (SXM, dense)"


def _nbytes(torch: Any, values: Any) -> int:
    return int(sum(x.numel() * x.element_size() for x in values if isinstance(x, torch.Tensor)))


def _flat(out: Any) -> list[Any]:
    return list(out) if isinstance(out, (tuple, list)) else [out]


def _count(torch: Any, model: Any, inputs: list[Any]) -> dict[str, Any]:
    from torch.utils.flop_counter import FlopCounterMode  # deferred: torch is passed in, not imported here

    counter = FlopCounterMode(display=False)
    with counter, torch.no_grad():
        out = model(*inputs)
    params = list(model.parameters()) + list(model.buffers()) if isinstance(model, torch.nn.Module) else []
    by_op = {str(k): int(v) for k, v in counter.get_flop_counts().get("Global", {}).items()}
    return {"input_bytes": _nbytes(torch, inputs), "param_bytes": _nbytes(torch, params),
            "output_bytes": _nbytes(torch, _flat(out)), "flops": int(counter.get_total_flops()), "flops_by_op": by_op}


def minimum_work(torch: Any, problem: Any, cast: Any, device_run: Any) -> dict[str, Any]:
    """Bytes and FLOPs of one forward. Child side (reference process): on the meta device, else
    ``device_run()`` gives (model, inputs) on the device. ``cast`` casts a list to the run's precision."""
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


def assess(work: dict[str, Any], kernel_ms: float | None, reference_ms: float | None,
           peaks: dict[str, float] | None) -> tuple[dict[str, Any], str | None]:
    """The speed-of-light record, and the impossible flag's message (parent side)."""
    nbytes = int(work.get("input_bytes", 0)) + int(work.get("param_bytes", 0)) + int(work.get("output_bytes", 0))
    flops = int(work.get("flops", 0))
    record: dict[str, Any] = {"bytes": nbytes, "flops": flops, **{k: work[k] for k in ("flops_by_op", "counted_on")
                                                                  if k in work}}
    if not peaks:
        record["peaks"] = None
        return record, None
    t_bytes = nbytes / peaks["bytes_per_s"]
    t_flops = flops / peaks["flops_per_s"]
    sol_ms = max(t_bytes, t_flops) * 1e3
    record.update(peaks=dict(peaks), sol_ms=sol_ms, bound="memory" if t_bytes >= t_flops else "compute")
    for side, ms in (("kernel", kernel_ms), ("reference", reference_ms)):
        if ms and ms > 0:
            record[f"{side}_fraction"] = sol_ms / ms
            record[f"{side}_bytes_per_s"] = nbytes / (ms / 1e3)
            record[f"{side}_flops_per_s"] = flops / (ms / 1e3)
    ker, ref = record.get("kernel_fraction"), record.get("reference_fraction")
    record["bound_holds"] = ref is None or ref <= 1.0
    record["impossible"] = bool(ker is not None and ker > 1.0 and record["bound_holds"] and sol_ms > 0)
    if not record["impossible"]:
        return record, None
    return record, (f"The kernel took {kernel_ms:.4g} ms, less than the {sol_ms:.4g} ms the problem needs at the "
                    f"hardware's peaks ({nbytes / 1e6:.3g} MB at {peaks['bytes_per_s'] / TERA:.3g} TB/s, "
                    f"{flops / 1e9:.3g} GFLOP at {peaks['flops_per_s'] / TERA:.4g} TFLOP/s): "
                    f"{ker:.2f} times the speed of light, physically impossible for this work.")


def peaks_for(slug: str, override: dict[str, float] | None) -> dict[str, float] | None:
    """The peaks a result is judged by: the config's, else the hardware's (None for a CPU)."""
    if override:
        return dict(override)
    return PEAKS.get(slug)
