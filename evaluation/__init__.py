"""KernelBench scoring library: isolated, hard-to-fool evaluation of a kernel against its reference.

Public API::

    from evaluation import evaluate, EvaluationConfig, EvaluationResult, check_problem, probe_hardware, STATUSES

This package imports only the standard library at import time (torch is imported lazily, and
never initialises CUDA in the calling process). It must never import Django.
"""

from __future__ import annotations

from typing import Any

from .types import FLAG_CODES, NOTE_CODES, STATUSES, EvaluationConfig, EvaluationResult

__all__ = ["evaluate", "EvaluationConfig", "EvaluationResult", "check_problem", "probe_hardware", "STATUSES",
           "FLAG_CODES", "NOTE_CODES"]


def evaluate(problem_source: str, kernel_source: str, config: EvaluationConfig | None = None) -> EvaluationResult:
    """Evaluate ``kernel_source`` (defines ModelNew) against ``problem_source`` (defines Model)."""
    from .runner import evaluate as _evaluate

    return _evaluate(problem_source, kernel_source, config)


def check_problem(problem_source: str, config: EvaluationConfig | None = None) -> dict[str, Any]:
    """Build and run a problem's reference twice under one seed; report determinism and scale."""
    from .problem_check import check_problem as _check

    return _check(problem_source, config)


def probe_hardware(device: str = "auto") -> dict[str, Any]:
    """Describe this host's hardware, found in a child process (the caller never touches CUDA)."""
    from .hardware import probe_hardware as _probe

    return _probe(device)
