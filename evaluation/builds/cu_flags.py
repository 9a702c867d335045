"""What the build adds to nvcc's command for a kernel's ``.cu``: the host side's optimisation level.

nvcc's ``-O`` sets the level of the host compiler only (the device code's is ``-Xptxas``'s, and the
PTX and cubin come out the same at any ``-O``: ``tests/evaluation/test_cu_flags.py`` compiles a
kernel both ways and compares them). A source with no ``-O`` has its host side compiled at gcc's
``-O0`` already; the kernels that pass ``-O3`` in ``extra_cuda_cflags`` (23 of the field's 413) pay
for an optimised host compile of everything the ``.cu`` includes. ``KB_CU_HOST_OPT`` (``O0`` to
``O3``; unset: the kernel's own) names the level every ``.cu`` gets instead, through
``NVCC_APPEND_FLAGS`` (nvcc reads it after the command's own flags, and the last ``-O`` wins). It is
not part of ninja's commands, so it is part of the build key (``build.build_key``): a build made
under one level is never taken for another.

Off by default: the level changes the host code that launches the kernel, not what the GPU
computes, and whether the launch stays as fast is measured on the GPU host
(``benchmarks/gpu/build_phases.sh``, cut ``host_O0``: the same flags).
"""

from __future__ import annotations

import os

LEVELS = ("O0", "O1", "O2", "O3")


def host_opt_level() -> str:
    """The host level every ``.cu`` is compiled at ($KB_CU_HOST_OPT), "" for the kernel's own."""
    level = os.environ.get("KB_CU_HOST_OPT", "").strip().lstrip("-")
    return level if level in LEVELS else ""


def nvcc_append_flags(device: str) -> str:
    """What ``NVCC_APPEND_FLAGS`` holds for a build on ``device`` ("" for none)."""
    level = host_opt_level()
    return f"-{level}" if device == "cuda" and level else ""
