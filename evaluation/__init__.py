"""KernelBench scoring library: isolated, hard-to-fool evaluation of a kernel against its reference.

Public API::

    from evaluation import evaluate, EvaluationConfig, EvaluationResult, check_problem, probe_hardware, STATUSES

This package imports only the standard library at import time (torch is imported lazily, and
never initialises CUDA in the calling process). It must never import Django.
"""

from __future__ import annotations

from evaluation.phases.problem_check import check_problem
from evaluation.results.hardware import probe_hardware
from evaluation.results.types import FLAG_CODES, NOTE_CODES, STATUSES, EarlierTiming, EvaluationConfig, EvaluationResult
from evaluation.runner import evaluate
from evaluation.sandbox.host_errors import INFRASTRUCTURE_ERROR

__all__ = ["evaluate", "EvaluationConfig", "EvaluationResult", "check_problem", "probe_hardware", "STATUSES",
           "FLAG_CODES", "NOTE_CODES", "INFRASTRUCTURE_ERROR", "EarlierTiming"]
