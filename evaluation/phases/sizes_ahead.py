"""A problem's sizes found ahead of its evaluation, off the GPU: what the memory plan
(``memory_plan``) would otherwise ask the reference process for on the GPU's critical path.

The first operator on the meta device imports ``torch._dynamo`` and sympy: the first evaluation of
each problem on a worker spent 5-6 s there on a 16-core H100 host with builds beside it (GPU check
run 19), more than the rest of the evaluation, with the GPU idle. A builder that compiles the next
kernels ahead (the site's look-ahead builder, the sweep's build pool) calls ``find_sizes`` for their
problems too: a sandboxed reference process on the CPU, no GPU, its answer kept where every
evaluation of the host finds it (``problem_facts.FACTS``, on disk in the build cache's root).

Only whole figures are kept: a problem whose inputs or model cannot be made on the meta device in
a process without a GPU (one that places tensors on CUDA itself) is left to its evaluation, which
finds its sizes with the device there.
"""

from __future__ import annotations

import time

from evaluation.phases.problem_facts import FACTS, SIZE_FIELDS, ProblemKey, problem_digest, whole_sizes
from evaluation.phases.sandboxes import sandbox_for
from evaluation.results.types import EvaluationConfig
from evaluation.sandbox.process import ChildError
from evaluation.sandbox.protocol import EstimateReply, EstimateRequest, MalformedReply, ReadyReply, parse

#: Seconds a process gets to start and find the sizes (torch's import and the meta device's first use).
FIND_TIMEOUT_S = 120.0


def find_sizes(problem_source: str, cfg: EvaluationConfig) -> str:
    """Find and keep the sizes of ``problem_source`` at ``cfg``'s scale, unless kept already.
    Returns what happened, in words ("kept", "found", or why nothing was kept); never raises for the
    problem's code (its evaluation says what is wrong with it)."""
    key = ProblemKey(problem_digest(problem_source), cfg)
    if whole_sizes(FACTS.get(key, "sizes")):
        return "kept"
    deadline = time.monotonic() + FIND_TIMEOUT_S
    try:
        with sandbox_for(cfg, device="cpu", cpu_threads=1) as sandbox:
            proc = sandbox.spawn("reference", sandbox.write_source("problem.py", problem_source))
            ready = parse(ReadyReply, proc.recv(deadline))
            if not ready.ok:
                return f"not found: the process did not start ({ready.error})"
            est = parse(EstimateReply, proc.request(EstimateRequest(), deadline))
    except (ChildError, MalformedReply, OSError) as exc:
        return f"not found: {type(exc).__name__}: {exc}"
    sizes = {name: getattr(est, name) for name in SIZE_FIELDS}
    if not est.ok or not whole_sizes(sizes) or min(sizes.values()) < 0:
        return "not found: " + (est.error or "the meta device could not make every tensor without a GPU")
    FACTS.put(key, "sizes", sizes)
    return "found"
