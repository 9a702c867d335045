"""Phases 2 and 3 of an evaluation: build both models, then check the kernel's outputs.

Each process makes its own inputs from the trial's seed. The kernel's outputs travel as a file
that the parent moves into the reference process's directory; the reference process (trusted
code, another uid) compares them on the device with its own outputs, which never leave it.
"""

from __future__ import annotations

import time

from .build import BuildDir
from .compare import Comparison, spots_match
from .protocol import CompareReply, CorrectReply, LoadReply
from .sandbox import ChildError, Sandbox
from .seeds import derive_seed
from .types import PRECISIONS
from .session import Abort, Pair


def load_models(pair: Pair, build: BuildDir) -> None:
    """Build the reference and the kernel model under the same seed (kernel build time: ``build``)."""
    res = pair.res
    init_seed = derive_seed(pair.master, "init")
    t0 = time.monotonic()
    msg = {"op": "load", "init_seed": init_seed, "dtype": PRECISIONS[pair.cfg.precision]}
    r_ref, r_ker = pair.both(msg, LoadReply)
    res.timings_s["load"] = round(time.monotonic() - t0, 4)
    if r_ref.ok:
        res.environment.update(r_ref.environment)
    if not r_ker.ok:
        raise pair.kernel_failed(r_ker)
    if not r_ref.ok:
        raise pair.reference_failed(r_ref)
    res.compiled = True
    res.timings_s["build"] = round(r_ker.import_s + r_ker.init_s, 4)
    pair.merge_flags(r_ker)
    build.mark_built()


class _Trials:
    """What the correctness trials learn along the way."""

    def __init__(self, t0: float) -> None:
        self.t0 = t0
        self.first_spot: list[list[float]] | None = None
        self.input_dependent = False
        self.out_dtypes: list[str] = []


def check_correctness(pair: Pair, sandbox: Sandbox) -> list[str]:
    """Run the correctness trials; return the output dtypes (for the timing spot checks)."""
    cfg, res = pair.cfg, pair.res
    seen = _Trials(time.monotonic())
    for i in range(cfg.correctness_trials):
        _trial(pair, sandbox, i, seen)
        res.trials_passed += 1
    if cfg.correctness_trials > 1 and pair.defence_on("fresh_inputs") and not seen.input_dependent:
        res.add_flag("input_independent_reference", "The reference output was the same for every trial's inputs; "
                                                    "a constant output would pass.")
    res.correct = True
    res.status = "correct"
    res.timings_s["correctness"] = round(time.monotonic() - seen.t0, 4)
    return seen.out_dtypes


def _trial(pair: Pair, sandbox: Sandbox, i: int, seen: _Trials) -> None:
    cfg = pair.cfg
    seed = derive_seed(pair.master, "correct", i if pair.defence_on("fresh_inputs") else 0)
    msg = {"op": "correct", "seed": seed, "trial": i, "spot_seed": derive_seed(pair.master, "dependence")}
    r_ref, r_ker = pair.both(msg, CorrectReply)
    pair.merge_flags(r_ker)
    if not r_ker.ok:
        raise pair.kernel_failed(r_ker)
    if not r_ref.ok:
        raise pair.reference_failed(r_ref)
    cmp = _compare(pair, sandbox, r_ker, i)
    _record(pair, cmp)
    seen.out_dtypes = list(r_ref.dtypes)
    if seen.first_spot is None:
        seen.first_spot = r_ref.spot
    elif not seen.input_dependent:
        seen.input_dependent = not spots_match(seen.first_spot, r_ref.spot, seen.out_dtypes, cfg.atol, cfg.rtol)
    if not cmp.ok:
        pair.res.timings_s["correctness"] = round(time.monotonic() - seen.t0, 4)
        raise Abort("incorrect", f"trial {i + 1}: {cmp.reason}")


def _compare(pair: Pair, sandbox: Sandbox, r_ker: CorrectReply, i: int) -> Comparison:
    """Hand the kernel's output file to the reference process and have it compare."""
    try:
        name = sandbox.hand_over(pair.ker, pair.ref, r_ker.file, f"kernel_out_{i}.pt")
    except (ChildError, OSError) as exc:
        raise Abort("runtime_error", f"could not take the kernel's outputs: {exc}") from exc
    msg = {"op": "compare", "file": name, "atol": pair.cfg.atol, "rtol": pair.cfg.rtol,
           "scale_check": pair.defence_on("scale_check")}
    r_cmp = pair.request(pair.ref, msg, CompareReply, extra_s=30.0)
    if not r_cmp.ok:
        raise Abort("incorrect" if r_cmp.kind == "incorrect" else "runtime_error",
                    f"trial {i + 1}: {r_cmp.error}", r_cmp.traceback)
    try:
        return Comparison(**r_cmp.comparison)
    except TypeError as exc:
        raise Abort("crashed", f"reference: malformed comparison: {exc}") from exc


def _record(pair: Pair, cmp: Comparison) -> None:
    res = pair.res
    res.max_abs_diff = max(res.max_abs_diff or 0.0, float(cmp.max_abs_diff))
    res.max_rel_diff = max(res.max_rel_diff or 0.0, float(cmp.max_rel_diff))
    if cmp.near_zero:
        res.add_flag("near_zero_reference", f"The reference output is tiny (max |ref| = {cmp.ref_max_abs:.3g}); "
                                            "elementwise tolerances alone would accept a zero output.")
