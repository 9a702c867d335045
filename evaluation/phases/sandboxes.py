"""A sandbox made with an evaluation's limits (``EvaluationConfig``): the one place that reads them
into ``Sandbox``'s arguments, for an evaluation's processes, a problem's check and a problem's sizes
found ahead alike. Each caller names only where it differs (the CPU for the sizes, the build entry
and defences for an evaluation)."""

from __future__ import annotations

from typing import Any

from evaluation.results.types import EvaluationConfig
from evaluation.sandbox.sandbox import Sandbox


def sandbox_for(cfg: EvaluationConfig, **overrides: Any) -> Sandbox:
    """A sandbox with ``cfg``'s device, scale, memory, file-size and process limits, hidden paths,
    isolation and threads; ``overrides`` are further ``Sandbox`` arguments, or replace those."""
    limits: dict[str, Any] = {
        "device": cfg.device, "size_scale": cfg.size_scale, "memory_limit_mb": cfg.memory_limit_mb,
        "hide_paths": cfg.hide_paths, "isolation": cfg.isolation, "cpu_threads": cfg.cpu_threads,
        "max_processes": cfg.max_processes, "file_size_limit_mb": cfg.file_size_limit_mb,
    }  # fmt: skip
    return Sandbox(**(limits | overrides))
