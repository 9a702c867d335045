"""Phases 2 and 3 of an evaluation: build both models, then check the kernel's outputs.

Each process makes its own inputs from the trial's seed. The kernel's outputs travel as a file
that the parent moves into the reference process's directory; the reference process (trusted
code, another uid) compares them on the device with its own outputs, which never leave it.
"""

from __future__ import annotations

import dataclasses
import math
import os
import time

from evaluation.phases.compare import Comparison, spots_match
from evaluation.phases.seeds import derive_seed
from evaluation.phases.session import Abort, Pair
from evaluation.results.types import PRECISIONS
from evaluation.sandbox.host_errors import INFRASTRUCTURE_ERROR, host_error
from evaluation.sandbox.process import ChildError
from evaluation.sandbox.protocol import (
    CompareReply,
    CompareRequest,
    CorrectReply,
    CorrectRequest,
    ExportFileRequest,
    LoadReply,
    LoadRequest,
)
from evaluation.sandbox.sandbox import Sandbox


def load_models(pair: Pair) -> None:
    """Build the reference and the kernel model under the same seed (kernel build time: ``build``)."""
    res = pair.res
    init_seed = derive_seed(pair.master, "init")
    t0 = time.monotonic()
    msg = LoadRequest(init_seed=init_seed, dtype=PRECISIONS[pair.cfg.precision])
    r_ref, r_ker = pair.both(msg, LoadReply, with_ref2=True) if not pair.cfg.cpus else _load_pinned(pair, msg)
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


def _load_pinned(pair: Pair, msg: LoadRequest) -> tuple[LoadReply, LoadReply]:
    """``load`` with every process pinned to the same cores, ``cfg.cpus``: the processes take turns,
    so each is timed on the very cores the others are (on a VM, vCPUs differ in speed, and each
    drifts; a process left on a core of its own settles into that core's speed)."""
    cpus = list(pair.cfg.cpus)
    procs = pair.processes()
    for p in procs:
        try:
            p.send(dataclasses.replace(msg, cpus=list(cpus)))
        except ChildError as exc:
            raise Abort(exc.kind, exc.message) from exc
    r_ker = pair.receive(pair.ker, LoadReply)
    r_ref = pair.receive(pair.ref, LoadReply)
    if pair.ref2 is not None:
        r2 = pair.receive(pair.ref2, LoadReply)
        if r_ref.ok and not r2.ok:
            r_ref = r2
    return r_ref, r_ker


class _Trials:
    """What the correctness trials learn along the way."""

    def __init__(self, t0: float) -> None:
        self.t0 = t0
        self.first_spot: list[list[float]] | None = None
        self.input_dependent = False
        self.out_dtypes: list[str] = []
        self.worst_ratio = 0.0  # the largest share of the tolerance any element used (compare.Comparison)


def check_correctness(pair: Pair, sandbox: Sandbox) -> list[str]:
    """Run the correctness trials; return the output dtypes (for the timing spot checks)."""
    cfg, res = pair.cfg, pair.res
    seen = _Trials(time.monotonic())
    for i in range(cfg.correctness_trials):
        _trial(pair, sandbox, i, seen)
        res.trials_passed += 1
    _near_tolerance(pair, sandbox, seen)
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
    poisoned = poisons(pair, i)
    msg = CorrectRequest(seed=seed, trial=i, spot_seed=derive_seed(pair.master, "dependence"), poison=poisoned)
    r_ref, r_ker = pair.both(msg, CorrectReply)
    pair.merge_flags(r_ker)
    if not r_ker.ok:
        raise pair.kernel_failed(r_ker)
    if not r_ref.ok:
        raise pair.reference_failed(r_ref)
    cmp = _compare(pair, sandbox, r_ker, i)
    _record(pair, cmp)
    seen.worst_ratio = max(seen.worst_ratio, cmp.tol_ratio)
    _note_tolerance(pair, seen, i + 1)
    seen.out_dtypes = list(r_ref.dtypes)
    if seen.first_spot is None:
        seen.first_spot = r_ref.spot
    elif not seen.input_dependent:
        seen.input_dependent = not spots_match(seen.first_spot, r_ref.spot, seen.out_dtypes, cfg.atol, cfg.rtol)
    if not cmp.ok:
        pair.res.timings_s["correctness"] = round(time.monotonic() - seen.t0, 4)
        raise Abort("incorrect", f"trial {i + 1}: {cmp.reason}{_poison_hint(cmp, poisoned)}{_near_miss(pair, cmp, i)}")


def poisons(pair: Pair, i: int) -> bool:
    """Whether trial ``i`` runs the kernel's call with the memory it leaves unwritten poisoned
    (evaluation.child.poison): every trial but the first. The first call is the kernel's own
    start: what it compiles, autotunes or captures in a CUDA graph then is what the timed calls run,
    and the poison would be in it (a captured graph would replay the fills in every timed call, and
    torch.compile's graph would be one made for deterministic mode). One poisoned trial fails a kernel
    that returns memory it never wrote, every time. The instruments' reruns are not poisoned: the
    determinism check must see the operators the timed calls run."""
    return i > 0 and pair.defence_on("poison_unwritten")


def _poison_hint(cmp: Comparison, poisoned: bool) -> str:
    if poisoned and cmp.unexpected_nan:
        return (" (in this trial, memory the kernel's call took from torch.empty and left unwritten reads as "
                "NaN: the output, or something it was computed from, was never written)")
    return ""


def _near_tolerance(pair: Pair, sandbox: Sandbox, seen: _Trials) -> None:
    """A kernel whose error came near the tolerance (``near_tolerance_ratio`` of it on some
    element) passes or fails by the draw of its inputs; it gets ``near_tolerance_trials`` more trials
    (fresh seeds) before its verdict, and the verdict says how close it came."""
    cfg, res = pair.cfg, pair.res
    first, n, extra = seen.worst_ratio, cfg.correctness_trials, cfg.near_tolerance_trials
    if first < cfg.near_tolerance_ratio or extra < 1:
        return
    res.trials_total += extra
    try:
        for i in range(n, n + extra):
            _trial(pair, sandbox, i, seen)
            res.trials_passed += 1
    except Abort as ab:
        raise Abort(ab.status, f"{ab.error} (an extra trial: the first {n} trials used up to {first:.0%} of the "
                               "tolerance, so more were run)", ab.log, ab.kernel_side) from ab
    worst = seen.worst_ratio
    res.add_flag("near_tolerance", f"The error reached {worst:.0%} of the tolerance on some element (margin "
                                   f"{1 - worst:.0%}); {extra} more trials were run before the verdict and all "
                                   f"{n + extra} passed. Another draw of inputs may still fail it.")


def _near_miss(pair: Pair, cmp: Comparison, i: int) -> str:
    """A trial failed by a hair: its worst element within ``1 / near_tolerance_ratio`` (2x)
    of the tolerance, the mirror of the pass side's band. The verdict stays incorrect; the error says how
    close it came and the ``near_tolerance`` note, with the margin, says why another evaluation may pass
    it. Only an elementwise miss counts (not NaN, a shape, or the scale check)."""
    ratio, band = float(cmp.tol_ratio), pair.cfg.near_tolerance_ratio
    elementwise = "outside tolerance" in str(cmp.reason) and math.isfinite(float(cmp.max_abs_diff))
    if not (elementwise and band > 0 and 1.0 < ratio <= 1.0 / band):
        return ""
    # A note, not a flag: flags send kernels to reviewers, and an incorrect kernel scores nothing.
    pair.res.add_note("near_tolerance", f"Trial {i + 1} failed with its error at {ratio:.0%} of the tolerance on some "
                                        f"element (over by {ratio - 1:.0%}; within {1 / band:g}x of it): another "
                                        "draw of inputs may pass it. The verdict stands.")
    return f" ({ratio:.0%} of the tolerance: a near miss)"


def _note_tolerance(pair: Pair, seen: _Trials, trials: int) -> None:
    """How close the trials so far came to the tolerance, in ``instruments['tolerance']``."""
    worst = seen.worst_ratio
    pair.res.instruments["tolerance"] = {
        "worst_ratio": round(worst, 4), "margin": round(1.0 - worst, 4), "trials": trials,
        "extra_trials": max(0, trials - pair.cfg.correctness_trials), "near": worst >= pair.cfg.near_tolerance_ratio,
    }


def _compare(pair: Pair, sandbox: Sandbox, r_ker: CorrectReply, i: int) -> Comparison:
    return compare_trial(pair, sandbox, r_ker, i)[0]


def compare_trial(pair: Pair, sandbox: Sandbox, r_ker: CorrectReply, i: int,
                  fingerprint: bool = False, fp64: bool = False) -> tuple[Comparison, CompareReply]:
    """Have the reference process compare the kernel's outputs: a shared GPU buffer whose descriptor
    the parent passes on, or else (CPU, or the buffer could not be mapped) a file the parent moves.
    ``fingerprint``, ``fp64``: what the instruments ask of the comparison too (a digest of the kernel's
    outputs, errors against an fp64 reference); the reference's reply comes back with the comparison."""
    msg = CompareRequest(atol=pair.cfg.atol, rtol=pair.cfg.rtol, scale_check=pair.defence_on("scale_check"),
                         fingerprint=fingerprint, fp64=fp64)
    r_cmp = None
    if r_ker.ipc_layout is not None:
        r_cmp = _compare_shared(pair, r_ker, msg)
        if r_cmp.kind == "ipc_failed" and not r_cmp.ok:
            pair.res.environment["output_transport"] = f"file (shared GPU buffer failed: {r_cmp.error})"
            r_exp = pair.request(pair.ker, ExportFileRequest(layout=r_ker.ipc_layout, trial=i), CorrectReply)
            if not r_exp.ok:
                raise pair.kernel_failed(r_exp)
            r_cmp, r_ker = None, r_exp
        else:
            pair.res.environment["output_transport"] = "gpu_shared"
    if r_cmp is None:
        r_cmp = _compare_file(pair, sandbox, r_ker, i, msg)
    if not r_cmp.ok:
        kind = r_cmp.kind if r_cmp.kind in ("incorrect", INFRASTRUCTURE_ERROR) else "runtime_error"
        raise Abort(kind, f"trial {i + 1}: {r_cmp.error}", r_cmp.traceback)
    try:
        return Comparison(**r_cmp.comparison), r_cmp
    except TypeError as exc:
        raise Abort("crashed", f"reference: malformed comparison: {exc}") from exc


def _compare_shared(pair: Pair, r_ker: CorrectReply, msg: CompareRequest) -> CompareReply:
    try:
        fd = pair.ker.recv_fd(pair.deadline)
    except ChildError as exc:
        raise Abort(exc.kind, exc.message) from exc
    try:
        pair.ref.send_fd(fd)
    except ChildError as exc:
        raise Abort(exc.kind, "reference: " + exc.message) from exc
    finally:
        os.close(fd)
    return pair.request(pair.ref, dataclasses.replace(msg, ipc_layout=r_ker.ipc_layout), CompareReply, extra_s=30.0)


def _compare_file(pair: Pair, sandbox: Sandbox, r_ker: CorrectReply, i: int, msg: CompareRequest) -> CompareReply:
    if "output_transport" not in pair.res.environment:
        why = f" (shared GPU buffer failed in the kernel process: {r_ker.ipc_error})" if r_ker.ipc_error else ""
        pair.res.environment["output_transport"] = "file" + why
    try:
        name = sandbox.hand_over(pair.ker, pair.ref, r_ker.file, f"kernel_out_{i}.pt")
    except (ChildError, OSError) as exc:
        kind = INFRASTRUCTURE_ERROR if host_error(exc) else "runtime_error"
        raise Abort(kind, f"could not take the kernel's outputs: {exc}") from exc
    return pair.request(pair.ref, dataclasses.replace(msg, file=name), CompareReply, extra_s=30.0)


def _record(pair: Pair, cmp: Comparison) -> None:
    res = pair.res
    res.max_abs_diff = max(res.max_abs_diff or 0.0, float(cmp.max_abs_diff))
    res.max_rel_diff = max(res.max_rel_diff or 0.0, float(cmp.max_rel_diff))
    if cmp.near_zero:
        res.add_flag("near_zero_reference", f"The reference output is tiny (max |ref| = {cmp.ref_max_abs:.3g}); "
                                            "elementwise tolerances alone would accept a zero output.")
