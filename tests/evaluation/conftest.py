"""What several modules of the evaluation suite share, made once per run (by whichever of
pytest-xdist's processes needs it first; the other waits for it).

A compile of a ``load_inline`` wrapper (``torch/extension.h``) costs 20-40 s of one core on a small
CI machine. test_pch.py and test_unit_cache.py each compare their new way of building the wrapper of
``benchmarks.wrapper_kernel.WRAPPER_KERNEL`` (through the precompiled headers; through the unit server) with the
plain way, headers and unit server off. That plain build is the same compile for both (the same
``main.cpp``, the same flags, module name ``helpers.WRAPPER_NAME``), so it is made once here. It
runs in a process of its own, started by whichever module first needs it, while that module's own
builds (a header build, a server compile: one core each) take the other core; the module waits for
it before its setup ends, so it never runs beside another test (``helpers.BackgroundBuild``). The
two modules may run in different pytest processes: the second finds the first's build, or waits
for it without a compile of its own.
"""

from __future__ import annotations

import pytest

from tests.evaluation.helpers import WRAPPER_NAME, BackgroundBuild, run_folder, wrapper_kernel


@pytest.fixture(scope="session")
def plain_wrapper(tmp_path_factory):
    """``wrapper_kernel(WRAPPER_NAME)`` built the plain way, once per run, whichever pytest process
    needs it first (not started until a fixture calls ``start()`` or ``result()``)."""
    folder = run_folder(tmp_path_factory, "kb-plain-wrapper")
    build = BackgroundBuild(folder, wrapper_kernel(WRAPPER_NAME), {"KB_PCH": "0", "KB_UNITS": "0"})
    yield build
    build.stop()
