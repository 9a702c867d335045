"""KernelBench scoring library: isolated, hard-to-fool evaluation of a kernel against its reference.

Public API::

    from evaluation import evaluate, EvaluationConfig, EvaluationResult, check_problem, probe_hardware, STATUSES

This package imports only the standard library at import time (torch is imported lazily, and
never initialises CUDA in the calling process). It must never import Django.

The names above are loaded on first use (PEP 562): the sandboxed processes import
``evaluation.child.harness`` through this package, and an eager import gave each of them the
parent's whole library (the runner, the build stage, the problem checks: 59 of the package's modules
instead of 30, about 50 ms more CPU of each process's start on the 2-core development machine),
none of which a kernel's process calls or should hold.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from evaluation.phases.problem_check import check_problem
    from evaluation.results.hardware import probe_hardware
    from evaluation.results.types import (
        FLAG_CODES,
        NOTE_CODES,
        STATUSES,
        EarlierTiming,
        EvaluationConfig,
        EvaluationResult,
    )
    from evaluation.runner import evaluate
    from evaluation.sandbox.host_errors import INFRASTRUCTURE_ERROR

#: Each public name and the module that defines it.
_HOMES = {
    "evaluate": "evaluation.runner",
    "check_problem": "evaluation.phases.problem_check",
    "probe_hardware": "evaluation.results.hardware",
    "INFRASTRUCTURE_ERROR": "evaluation.sandbox.host_errors",
    **{name: "evaluation.results.types" for name in
       ("EvaluationConfig", "EvaluationResult", "STATUSES", "FLAG_CODES", "NOTE_CODES", "EarlierTiming")},
}

__all__ = ["evaluate", "EvaluationConfig", "EvaluationResult", "check_problem", "probe_hardware", "STATUSES",
           "FLAG_CODES", "NOTE_CODES", "INFRASTRUCTURE_ERROR", "EarlierTiming"]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'evaluation' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value  # looked up once
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
