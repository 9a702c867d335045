"""A sandbox made with an evaluation's limits (``EvaluationConfig``): the one place that reads them
into ``Sandbox``'s arguments, for an evaluation's processes, a problem's check and a problem's sizes
found ahead alike. Each caller names only where it differs (the CPU for the sizes, the build entry
and defences for an evaluation)."""

from __future__ import annotations

from typing import TypedDict, Unpack

from evaluation.results.types import EvaluationConfig
from evaluation.sandbox.sandbox import Sandbox


class SandboxArgs(TypedDict, total=False):
    """``Sandbox``'s keyword arguments, so that mypy checks the name and type of each override."""

    device: str
    size_scale: int
    memory_limit_mb: int
    hide_paths: tuple[str, ...]
    isolation: str
    build_dir: str | None
    disable: frozenset[str]
    cpu_threads: int | None
    max_processes: int
    file_size_limit_mb: int | None
    extra_env: dict[str, str] | None
    expose: tuple[str, ...]
    tmp_limit_mb: int | None


def sandbox_for(cfg: EvaluationConfig, **overrides: Unpack[SandboxArgs]) -> Sandbox:
    """A sandbox with ``cfg``'s device, scale, memory, file-size and process limits, hidden paths,
    isolation and threads; ``overrides`` are further ``Sandbox`` arguments, or replace those."""
    limits: SandboxArgs = {
        "device": cfg.device, "size_scale": cfg.size_scale, "memory_limit_mb": cfg.memory_limit_mb,
        "hide_paths": cfg.hide_paths, "isolation": cfg.isolation, "cpu_threads": cfg.cpu_threads,
        "max_processes": cfg.max_processes, "file_size_limit_mb": cfg.file_size_limit_mb,
    }  # fmt: skip
    return Sandbox(**(limits | overrides))
