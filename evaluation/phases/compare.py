"""Output comparison: run by the reference process (never inside the kernel's process), and by
check_problem in the parent on CPU tensors."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from evaluation.results.types import DEFAULT_TOLERANCES


def tolerances_for(dtype_name: str, atol: float | None, rtol: float | None) -> tuple[float, float]:
    d_atol, d_rtol = DEFAULT_TOLERANCES.get(dtype_name, (1e-4, 1e-4))
    return (d_atol if atol is None else atol, d_rtol if rtol is None else rtol)


def dtype_name(t: Any) -> str:
    return str(t.dtype).replace("torch.", "")


@dataclass
class Comparison:
    ok: bool = True
    reason: str | None = None
    max_abs_diff: float = 0.0
    max_rel_diff: float = 0.0
    rel_l2: float = 0.0
    ref_max_abs: float = 0.0
    near_zero: bool = False
    # The largest share of the allowed error any element used: max |out - ref| / (atol + rtol*|ref|)
    # (1.0 is the tolerance's edge; the near-tolerance rule reads it).
    tol_ratio: float = 0.0
    details: list[str] = field(default_factory=list)
    unexpected_nan: bool = False  # the output has NaN where the reference has none


CHUNK = 1 << 22


@dataclass
class _Sums:
    """Running sums over the chunks of one output."""

    sq_err: float = 0.0
    sq_ref: float = 0.0
    ref_max: float = 0.0


def compare_outputs(ref: list[Any], out: list[Any], atol: float | None, rtol: float | None,
                    scale_check: bool = True) -> Comparison:
    """Compare the kernel's outputs with the reference's.

    Fails on count/shape/dtype mismatch, on NaN/Inf where the reference has none (and vice versa),
    on any element outside atol + rtol*|ref|, and -- unless the reference is exactly zero -- when the
    error relative to the output's scale (||out-ref|| / ||ref||) exceeds 10*max(atol, rtol), which
    catches constant/zero outputs that pass elementwise only because the reference values are tiny.
    """
    c = Comparison()
    if len(ref) != len(out):
        c.ok, c.reason = False, f"kernel returned {len(out)} output(s), reference {len(ref)}"
        return c
    for i, (r, o) in enumerate(zip(ref, out, strict=False)):
        tag = f"output {i}" if len(ref) > 1 else "output"
        reason = _structure_mismatch(tag, r, o)
        if reason is not None:
            c.ok, c.reason = False, reason
            return c
        if not _compare_one(c, tag, r, o, atol, rtol, scale_check):
            return c
    return c


def _structure_mismatch(tag: str, r: Any, o: Any) -> str | None:
    import torch  # deferred: torch is heavy and the parent process never needs it

    if not isinstance(o, torch.Tensor) or type(o) is not torch.Tensor:
        return f"{tag} is not a plain tensor"
    if tuple(r.shape) != tuple(o.shape):
        return f"{tag} shape {tuple(o.shape)} != reference {tuple(r.shape)}"
    if r.dtype != o.dtype:
        return f"{tag} dtype {dtype_name(o)} != reference {dtype_name(r)}"
    return None


def _compare_one(c: Comparison, tag: str, r: Any, o: Any, atol: float | None, rtol: float | None,
                 scale_check: bool) -> bool:
    """Compare one output chunk by chunk into ``c``; False when the comparison must stop here."""
    a_tol, r_tol = tolerances_for(dtype_name(r), atol, rtol)
    rf = r.reshape(-1)
    of = o.reshape(-1)
    n = rf.numel()
    sums = _Sums()
    for s in range(0, n, CHUNK):
        if not _compare_chunk(c, tag, rf[s:s + CHUNK], of[s:s + CHUNK], a_tol, r_tol, sums):
            return False
    c.ref_max_abs = max(c.ref_max_abs, sums.ref_max)
    if n and sums.ref_max < 10 * a_tol:
        c.near_zero = True
    if sums.sq_ref > 0:
        rel = math.sqrt(sums.sq_err / sums.sq_ref)
        c.rel_l2 = max(c.rel_l2, rel)
        bound = min(0.5, 10 * max(a_tol, r_tol))
        if scale_check and c.ok and rel > bound:
            c.ok = False
            c.reason = (f"{tag}: error relative to the output's scale is {rel:.3g} (> {bound:g}); the "
                        f"reference values are small (max |ref| = {sums.ref_max:.3g}) so elementwise tolerances "
                        f"alone would pass")
    return True


def _compare_chunk(c: Comparison, tag: str, rc: Any, oc: Any, a_tol: float, r_tol: float, sums: _Sums) -> bool:
    import torch  # deferred: torch is heavy and the parent process never needs it

    if rc.is_complex():
        rc = torch.view_as_real(rc).reshape(-1)
        oc = torch.view_as_real(oc).reshape(-1)
    floor = _subnormal_floor(torch, rc.dtype)
    rc = rc.to(torch.float64)
    oc = oc.to(torch.float64)
    r_nan, o_nan = rc.isnan(), oc.isnan()
    if bool((r_nan != o_nan).any()):
        c.ok = False
        c.unexpected_nan = bool((o_nan & ~r_nan).any())
        c.reason = f"{tag} has NaN where the reference has none" if c.unexpected_nan else \
            f"{tag} lacks NaN where the reference has one"
        c.max_abs_diff = math.inf
        return False
    r_inf, o_inf = rc.isinf(), oc.isinf()
    if bool((r_inf != o_inf).any()) or bool((rc[r_inf] != oc[r_inf]).any()):
        c.ok = False
        c.reason = f"{tag} has Inf values that differ from the reference"
        c.max_abs_diff = math.inf
        return False
    fin = ~(r_nan | r_inf)
    rcf, ocf = rc[fin], oc[fin]
    if rcf.numel() == 0:
        return True
    diff = (ocf - rcf).abs()
    absr = rcf.abs()
    c.max_abs_diff = max(c.max_abs_diff, float(diff.max()))
    c.max_rel_diff = max(c.max_rel_diff, float((diff / absr.clamp_min(a_tol)).max()))
    c.tol_ratio = max(c.tol_ratio, float((diff / (a_tol + r_tol * absr).clamp_min(1e-300)).max()))
    sums.ref_max = max(sums.ref_max, float(absr.max()))
    # The scale check counts only what lies above float32's subnormal range (_subnormal_floor): an
    # honest reduction that underflows (L1 50's product of 256 normals, its outputs 0 and
    # 1e-45..1e-38) differs from the reference's order by a few subnormal steps, which read as a
    # relative error of 10-100 % of a reference that is itself almost all zeros.
    over = (diff - floor).clamp_min(0.0) if floor else diff
    sums.sq_err += float((over * over).sum())
    sums.sq_ref += float((absr * absr).sum())
    bad = diff > (a_tol + r_tol * absr)
    if bool(bad.any()) and c.ok:
        c.ok = False
        c.reason = (f"{tag}: {int(bad.sum())} element(s) outside tolerance (atol={a_tol:g}, rtol={r_tol:g}); "
                    f"max abs diff {float(diff.max()):.3g}")
    return True


#: Dtypes whose smallest normal number lies below this (float32, bfloat16, float64) have subnormals 30
#: orders of magnitude below any tolerance: only an underflow puts values there.
SUBNORMAL_FLOOR_MAX = 1e-30


def _subnormal_floor(torch: Any, dtype: Any) -> float:
    """The smallest normal number of a floating dtype with float32's exponent range or more
    (differences below it are rounding in the subnormal range); 0 for float16, whose subnormals
    (6e-8 to 6.1e-5) are values a real output holds (a softmax over 393,216 elements: 1.5e-6 to
    4e-6), and for integers and booleans."""
    if not dtype.is_floating_point:
        return 0.0
    tiny = float(torch.finfo(dtype).tiny)
    return tiny if tiny < SUBNORMAL_FLOOR_MAX else 0.0


def outputs_close(a: list[Any], b: list[Any], atol: float | None, rtol: float | None) -> bool:
    """True when two output lists are elementwise within tolerance (used to test input dependence)."""
    if len(a) != len(b):
        return False
    for x, y in zip(a, b, strict=False):
        if x.shape != y.shape or x.dtype != y.dtype:
            return False
        c = compare_outputs([x], [y], atol, rtol, scale_check=False)
        if not c.ok:
            return False
    return True


def spots_match(ref: list[list[float]], ker: list[list[float]], dtypes: list[str], atol: float | None,
                rtol: float | None) -> bool:
    return not spot_miss(ref, ker, dtypes, atol, rtol)


def spot_miss(ref: list[list[float]], ker: list[list[float]], dtypes: list[str], atol: float | None,
              rtol: float | None) -> str:
    """How the kernel's spot values (the same sampled elements of each output) miss the reference's,
    in words ("" when every one is within tolerance): what a reviewer of a timing mismatch reads."""
    if len(ref) != len(ker):
        return f"{len(ker)} outputs against {len(ref)}"
    for o, (rv, kv, dt) in enumerate(zip(ref, ker, dtypes, strict=False)):
        if len(rv) != len(kv):
            return f"output {o}: {len(kv)} values against {len(rv)}"
        a_tol, r_tol = tolerances_for(dt, atol, rtol)
        for x, y in zip(rv, kv, strict=False):
            if math.isnan(x) or math.isnan(y):
                if not (math.isnan(x) and math.isnan(y)):
                    return f"output {o}: {y:.6g} against {x:.6g}"
                continue
            if math.isinf(x) or math.isinf(y):
                if x != y:
                    return f"output {o}: {y:.6g} against {x:.6g}"
                continue
            if abs(x - y) > a_tol + r_tol * abs(x):
                return f"output {o}: {y:.6g} against {x:.6g} (allowed {a_tol + r_tol * abs(x):.3g})"
    return ""
