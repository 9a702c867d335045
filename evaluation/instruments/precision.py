"""The precision used: did the kernel compute an fp32 problem in lower precision?

The reference process runs its model once more in float64 on the very inputs of one trial (the fp32
inputs cast up: the same values) and measures two errors against that fp64 result: the kernel's and
the fp32 reference's own. An honest fp32 kernel sums in another order than PyTorch and lands within
a small factor of the reference's error; TF32 (10 mantissa bits), fp16 (10) or bf16 (7) arithmetic
inside lands near their unit roundoff, 2^-11 to 2^-8, hundreds of times above it. The flag needs
both: the kernel's relative error at least ``FLOOR`` and ``RATIO`` times the reference's.

Child side (``fp64_errors``, ``math_modes``) runs in the trusted reference process, with torch passed
in; parent side (``judge``) turns the figures into the record and the flag.
"""

from __future__ import annotations

import copy
import math
from typing import Any

#: The switches ``math_modes`` reports: each a bool, but the matmul precision, one of its three names.
MODE_SWITCHES = ("matmul_allow_tf32", "cudnn_allow_tf32", "fp16_reduced_reduction", "bf16_reduced_reduction")
MATMUL_PRECISIONS = ("highest", "high", "medium")

#: Relative L2 error (||kernel - fp64|| / ||fp64||) below which no downgrade is claimed: 2^-13, a
#: quarter of TF32's unit roundoff, far above fp32 summation error on KernelBench's sizes.
FLOOR = 2.0 ** -13
#: How many times the fp32 reference's own error the kernel's must be.
RATIO = 16.0
#: Where the reference's own error is below this, it counts as this (fp32's unit roundoff).
FP32_U = 2.0 ** -24
CHUNK = 1 << 22


def _flat(torch: Any, out: Any) -> list[Any]:
    return list(out) if isinstance(out, (tuple, list)) else [out]


def fp64_errors(torch: Any, model: Any, inputs: list[Any], ref_outs: list[Any], ker_outs: list[Any]) -> dict[str, Any]:
    """Errors of the fp32 reference's and the kernel's outputs against ``model`` run in float64 on
    ``inputs``; {"skipped": why} where that cannot be done (not fp32 outputs, the model fails in fp64)."""
    if not isinstance(model, torch.nn.Module):
        return {"skipped": "the reference is not an nn.Module"}
    if not ref_outs or any(r.dtype != torch.float32 for r in ref_outs):
        return {"skipped": "the problem's outputs are not float32"}
    try:
        model64 = copy.deepcopy(model).double()
        ins = [x.double() if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in inputs]
        with torch.no_grad():
            exact = [o.detach() for o in _flat(torch, model64(*ins))]
        del model64, ins
    except Exception as exc:  # noqa: BLE001 - problem code that cannot run in float64
        return {"skipped": f"the reference does not run in float64: {type(exc).__name__}: {str(exc)[:200]}"}
    if len(exact) != len(ref_outs) or any(e.shape != r.shape for e, r in zip(exact, ref_outs, strict=False)):
        return {"skipped": "the float64 reference's outputs have other shapes"}
    sums = {"ref_sq": 0.0, "ker_sq": 0.0, "exact_sq": 0.0, "ref_max": 0.0, "ker_max": 0.0}
    for e, r, k in zip(exact, ref_outs, ker_outs, strict=False):
        _accumulate(torch, sums, e.reshape(-1), r.reshape(-1), k.reshape(-1))
    norm = math.sqrt(sums["exact_sq"])
    if norm == 0.0:
        return {"skipped": "the float64 reference output is zero"}
    return {"kernel_rel_l2": math.sqrt(sums["ker_sq"]) / norm, "reference_rel_l2": math.sqrt(sums["ref_sq"]) / norm,
            "kernel_max_abs": sums["ker_max"], "reference_max_abs": sums["ref_max"]}


def _accumulate(torch: Any, sums: dict[str, float], e: Any, r: Any, k: Any) -> None:
    for s in range(0, e.numel(), CHUNK):
        ec = e[s:s + CHUNK]
        rc = r[s:s + CHUNK].to(torch.float64)
        kc = k[s:s + CHUNK].to(device=ec.device, dtype=torch.float64)
        fin = ec.isfinite() & rc.isfinite() & kc.isfinite()
        ec, rc, kc = ec[fin], rc[fin], kc[fin]
        if ec.numel() == 0:
            continue
        dr, dk = rc - ec, kc - ec
        sums["exact_sq"] += float((ec * ec).sum())
        sums["ref_sq"] += float((dr * dr).sum())
        sums["ker_sq"] += float((dk * dk).sum())
        sums["ref_max"] = max(sums["ref_max"], float(dr.abs().max()))
        sums["ker_max"] = max(sums["ker_max"], float(dk.abs().max()))


def math_modes(torch: Any) -> dict[str, Any]:
    """The process's float32 math switches (TF32 and reduced-precision reductions)."""
    modes: dict[str, Any] = {"float32_matmul_precision": torch.get_float32_matmul_precision()}
    try:
        modes["matmul_allow_tf32"] = bool(torch.backends.cuda.matmul.allow_tf32)
        modes["cudnn_allow_tf32"] = bool(torch.backends.cudnn.allow_tf32)
        modes["fp16_reduced_reduction"] = bool(torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction)
        modes["bf16_reduced_reduction"] = bool(torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction)
    except (AttributeError, RuntimeError):  # a torch without these switches
        pass
    return modes


def clean_modes(modes: Any) -> dict[str, Any]:
    """Parent side: a process's reported switches, the known keys with values of their kind only
    (the kernel's process may reply anything: instruments.sanitize)."""
    d = modes if isinstance(modes, dict) else {}
    out: dict[str, Any] = {k: d[k] for k in MODE_SWITCHES if isinstance(d.get(k), bool)}
    if d.get("float32_matmul_precision") in MATMUL_PRECISIONS:
        out["float32_matmul_precision"] = d["float32_matmul_precision"]
    return out


def judge(errors: dict[str, Any], kernel_modes: dict[str, Any], reference_modes: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
    """The precision record, and the flag's message when the kernel's error shows lower precision."""
    record: dict[str, Any] = dict(errors)
    kernel_modes, reference_modes = clean_modes(kernel_modes), clean_modes(reference_modes)
    changed = {k: v for k, v in kernel_modes.items() if reference_modes.get(k, v) != v}
    if changed:
        record["modes_changed"] = changed  # reported by the kernel's own process: a hint, not proof
    if "kernel_rel_l2" not in errors:
        return record, None
    ker, ref = float(errors["kernel_rel_l2"]), float(errors["reference_rel_l2"])
    ratio = ker / max(ref, FP32_U)
    record["ratio"] = ratio
    record["downgrade"] = ker >= FLOOR and ratio >= RATIO
    if not record["downgrade"]:
        return record, None
    hint = ("; the kernel's process switched " + ", ".join(f"{k}={v}" for k, v in changed.items())) if changed else ""
    return record, (f"Against a float64 reference the kernel's error is {ker:.3g} (relative L2; max abs "
                    f"{float(errors['kernel_max_abs']):.3g}), {ratio:.0f} times the fp32 reference's own "
                    f"({ref:.3g}): lower-precision arithmetic (TF32, fp16 or bf16){hint}.")
