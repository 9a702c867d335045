"""Phase 3b of an evaluation: what the problem's tensors need, against what the host has.

The reference process finds the problem's sizes on the meta device before anything is made
(``EstimateRequest``). On the CPU a problem that cannot fit the memory limit ends up front with the
figure, instead of the memory watchdog killing a process later; on the GPU the processes share one
card, and a problem three processes of which it cannot hold is timed with one reference process.

The sizes are found once per problem in the evaluating process (``problem_facts``: on the
evaluation's critical path, they cost 1.2-2 s of the reference process's CPU the first time); the
card's free memory is asked for afresh every time.
"""

from __future__ import annotations

import dataclasses

from evaluation.phases.problem_facts import FACTS, SIZE_FIELDS, whole_sizes
from evaluation.phases.session import Abort, Pair
from evaluation.sandbox.protocol import EstimateReply, EstimateRequest


def check_memory(pair: Pair) -> None:
    """Refuse (CPU) or fit (GPU) the problem by its sizes, found once per problem and scale."""
    est = _estimate(pair)
    pair.res.environment["input_mb"] = round(est.input_bytes / 2**20, 1) if est.input_bytes >= 0 else None
    pair.res.environment["output_mb"] = round(est.output_bytes / 2**20, 1) if est.output_bytes >= 0 else None
    if pair.cfg.device == "cpu":
        refusal = est.refusal(pair.cfg.memory_limit_mb, kernel_role=True)
        if refusal:
            raise Abort("runtime_error", refusal)
    else:
        fit_the_card(pair, est)


def _estimate(pair: Pair) -> EstimateReply:
    kept = _kept_sizes(pair)
    if kept is not None and pair.cfg.device == "cpu":
        return kept
    est = pair.request(pair.ref, EstimateRequest(sizes=kept is None), EstimateReply)
    if not est.ok:
        raise pair.reference_failed(est)
    if kept is None:
        FACTS.put(pair, "sizes", {name: getattr(est, name) for name in SIZE_FIELDS})
        return est
    return dataclasses.replace(kept, device_free_bytes=est.device_free_bytes)  # a moment's figure: never kept


def _kept_sizes(pair: Pair) -> EstimateReply | None:
    """The sizes found in an earlier evaluation of the problem, if they are whole numbers."""
    kept = FACTS.get(pair, "sizes")
    if kept is None or not whole_sizes(kept):
        return None
    return EstimateReply(ok=True, **{name: kept[name] for name in SIZE_FIELDS})


#: A process's peak on the GPU in working sets (one set of inputs and outputs): on an H100 (80 GB),
#: KernelBench level 1's 6 GB problems ran with three processes of them at a time in some evaluations
#: and ran out of memory in others, so a process holds about two sets at its peak (the trials' and the
#: timed calls' fresh inputs and outputs, the kernel process's copies); three leaves a margin.
GPU_WORKING_SETS = 3


def fit_the_card(pair: Pair, est: EstimateReply) -> None:
    """Three processes (the second reference's) of a problem too large for the card's free memory
    would make one of them run out of it, a failure of nobody's code: the evaluation goes on with one
    reference process, which the result says. Two that cannot fit are left to the card (an honest
    kernel then fails beside the reference, as KernelBench's own harness would)."""
    sets = est.working_set_bytes()
    if pair.ref2 is None or sets < 0 or est.device_free_bytes < 0:
        return
    need = GPU_WORKING_SETS * sets + max(est.param_bytes, 0)
    if 3 * need <= est.device_free_bytes:
        return
    pair.ref2.close(graceful=False)
    pair.ref2 = None
    pair.res.environment["reference_processes"] = 1
    pair.res.add_note("one_reference_process", f"The card had {est.device_free_bytes / 2**30:.1f} GB free, short of "
                                               f"three processes of this problem (about {need / 2**30:.1f} GB each): "
                                               "one reference process was timed, so the interval has no second "
                                               "process's term.")
