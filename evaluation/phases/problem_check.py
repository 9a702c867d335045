"""check_problem(): build a problem's reference in the sandbox and sanity-check it."""

from __future__ import annotations

import math
import secrets
import time
from typing import Any

from evaluation.phases.compare import compare_outputs, dtype_name, outputs_close, tolerances_for
from evaluation.phases.sandboxes import sandbox_for
from evaluation.phases.seeds import derive_seed
from evaluation.results.types import EvaluationConfig
from evaluation.sandbox.process import ChildError, SandboxProcess
from evaluation.sandbox.protocol import (
    CorrectReply,
    CorrectRequest,
    EstimateReply,
    EstimateRequest,
    LoadReply,
    LoadRequest,
    MalformedReply,
    ReadyReply,
    parse,
)
from evaluation.sandbox.sandbox import Sandbox


def _describe(outs: list[Any]) -> list[dict[str, Any]]:
    import torch  # deferred: torch is heavy; only check_problem's own report needs it here

    desc = []
    for t in outs:
        f = t.detach().to(torch.float64).reshape(-1)
        fin = f[torch.isfinite(f)]
        desc.append({
            "shape": list(t.shape),
            "dtype": dtype_name(t),
            "numel": t.numel(),
            "max_abs": float(fin.abs().max()) if fin.numel() else None,
            "rms": float(fin.pow(2).mean().sqrt()) if fin.numel() else None,
            "mean": float(fin.mean()) if fin.numel() else None,
            "non_finite": int(f.numel() - fin.numel()),
        })
    return desc


def check_problem(problem_source: str, config: EvaluationConfig | None = None) -> dict[str, Any]:
    """Run the reference twice under one seed and once under another; report shapes, scale, flags."""
    cfg = config or EvaluationConfig(timeout_s=300)
    seed = cfg.seed if cfg.seed is not None else secrets.randbits(62)
    report: dict[str, Any] = {"ok": False, "flags": [], "outputs": [], "error": None, "timings_s": {}}
    t_begin = time.monotonic()
    with sandbox_for(cfg) as sb:
        path = sb.write_source("problem.py", problem_source)
        proc = sb.spawn("reference", path)
        try:
            outs = _run_reference(sb, cfg, proc, seed, report, t_begin + cfg.timeout_s, t_begin)
        except (ChildError, RuntimeError, MalformedReply) as exc:
            report["error"] = str(exc)
            report["log"] = proc.read_log()
            report["timings_s"]["total"] = round(time.monotonic() - t_begin, 3)
            return report
    _judge(cfg, report, outs)
    report["ok"] = True
    report["timings_s"]["total"] = round(time.monotonic() - t_begin, 3)
    return report


def _check_memory(cfg: EvaluationConfig, proc: SandboxProcess, report: dict[str, Any], deadline: float) -> None:
    """Say up front when the problem's inputs, outputs and parameters cannot fit ``memory_limit_mb``
    on the CPU."""
    est = parse(EstimateReply, proc.request(EstimateRequest(), deadline))
    if not est.ok:
        raise RuntimeError(f"build failed: {est.error}")
    report["input_mb"] = round(est.input_bytes / 2**20, 1) if est.input_bytes >= 0 else None
    refusal = est.refusal(cfg.memory_limit_mb, kernel_role=False) if cfg.device == "cpu" else None
    if refusal:
        raise RuntimeError(refusal)


def _run_reference(sb: Sandbox, cfg: EvaluationConfig, proc: SandboxProcess, seed: int, report: dict[str, Any],
                   deadline: float, t_begin: float) -> list[list[Any]]:
    """Build the reference, run it on inputs A, A, B; return the three output lists."""
    ready = parse(ReadyReply, proc.recv(deadline))
    if not ready.ok:
        raise RuntimeError(ready.error)
    report["timings_s"]["process_start"] = round(time.monotonic() - t_begin, 3)
    _check_memory(cfg, proc, report, deadline)
    loaded = parse(LoadReply, proc.request(LoadRequest(init_seed=derive_seed(seed, "init")), deadline))
    if not loaded.ok:
        raise RuntimeError(f"build failed: {loaded.error}")
    report["environment"] = loaded.environment
    outs = []
    s_a, s_b = derive_seed(seed, "correct", 0), derive_seed(seed, "correct", 1)
    for trial, s in enumerate((s_a, s_a, s_b)):
        t0 = time.monotonic()
        r = parse(CorrectReply, proc.request(CorrectRequest(seed=s, trial=trial, save=True), deadline))
        if not r.ok:
            raise RuntimeError(f"run failed: {r.error}")
        report["timings_s"][f"run_{trial}"] = round(time.monotonic() - t0, 3)
        outs.append(sb.read_output(proc, r.file))
    return outs


def _judge(cfg: EvaluationConfig, report: dict[str, Any], outs: list[list[Any]]) -> None:
    """Determinism, input dependence, scale and finiteness of the reference's outputs."""

    def flag(code: str, message: str) -> None:
        report["flags"].append({"code": code, "message": message})

    report["outputs"] = _describe(outs[0])
    same = compare_outputs(outs[0], outs[1], 0.0, 0.0, scale_check=False)
    if not same.ok:
        flag("nondeterministic_reference", f"Two runs on the same inputs differ (max abs diff {same.max_abs_diff:.3g}).")
    report["deterministic"] = same.ok
    if outputs_close(outs[0], outs[2], cfg.atol, cfg.rtol):
        flag("input_independent_reference", "Outputs for two different input sets agree within tolerance; a "
                                            "constant output would pass.")
    for i, d in enumerate(report["outputs"]):
        atol, _ = tolerances_for(d["dtype"], cfg.atol, cfg.rtol)
        if d["max_abs"] is not None and d["max_abs"] < 10 * atol:
            flag("near_zero_reference", f"Output {i} is tiny (max |out| = {d['max_abs']:.3g} < 10*atol = "
                                        f"{10 * atol:g}); elementwise tolerances would accept zeros.")
        if d["non_finite"]:
            flag("non_finite_reference", f"Output {i} has {d['non_finite']} NaN/Inf value(s).")
        if d["rms"] is not None and math.isfinite(d["rms"]) and d["rms"] == 0.0:
            flag("near_zero_reference", f"Output {i} is all zeros.")
