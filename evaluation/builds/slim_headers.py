"""A CUDA source's own ``#include <torch/extension.h>`` read as what ``load_inline`` gives it.

``load_inline`` puts ``#include <torch/types.h>`` (with ``cuda.h`` and ``cuda_runtime.h``) before every
CUDA source it compiles: that is what torch means a ``.cu`` file to see. The sources models write
include ``torch/extension.h`` in the ``.cu`` as well, which adds torch's whole C++ frontend and
pybind11, and nvcc parses it three times (cudafe++, cicc, the host gcc: the critical path of a
build, 50-55 s on the H200 host for a kernel whose device code compiles in milliseconds). The
``.cu`` cannot use a precompiled header (evaluation/builds/pch.py says why), so this is the next cut:

The build process's ``CPATH`` names, after the precompiled headers' folder, a folder holding a
``torch/extension.h`` of our own. In a CUDA compile (``__CUDACC__``, which nvcc defines for its
preprocessing passes) it includes ``torch/types.h``; in any other (the C++ wrapper ``main.cpp``,
which needs the Python bindings) it includes the real header (``#include_next``). ``CPATH`` folders
come before torch's (``-isystem``) ones, so the source's include finds ours first. A source that
needs more of torch than ``types.h`` declares fails to compile that way and is built again with the
real header (``build_stage.build_locked``); only the build stage gets the folder, never the kernel's
process at evaluation time. The device code, the flags and the exported functions are the same
either way (a GPU test builds a kernel both ways and compares outputs bit for bit).

Layout: ``<build_cache_dir>/.pch/slim-cu-<FORMAT>/include/torch/extension.h``, written once (root
owns ``.pch``: kernels read it, never write it), never rewritten while its text is right: ninja's
dependency records name it, and a newer file would make every entry built with it out of date.
``KB_SLIM_CU_HEADERS=0`` turns it off.
"""

from __future__ import annotations

import os
import secrets

FORMAT = "1"
HEADER_TEXT = """\
/* The harness's stand-in for torch/extension.h (evaluation/builds/slim_headers.py): a CUDA source gets
   torch/types.h, which load_inline itself puts before every CUDA source; anything else gets the
   real header. A source that needs more is built again with the real one. */
#pragma once
#if defined(__CUDACC__)
#include <torch/types.h>
#else
#include_next <torch/extension.h>
#endif
"""


def enabled(device: str) -> bool:
    return device == "cuda" and os.environ.get("KB_SLIM_CU_HEADERS", "1") != "0"


def include_dir(cache_root: str) -> str:
    return os.path.join(cache_root, ".pch", f"slim-cu-{FORMAT}", "include")


def ensure(cache_root: str) -> str | None:
    """The folder to name in ``CPATH``, written if it is not there yet; None if it cannot be."""
    folder = include_dir(cache_root)
    path = os.path.join(folder, "torch", "extension.h")
    if _reads(path) == HEADER_TEXT:
        return folder
    try:
        os.makedirs(os.path.dirname(path), mode=0o755, exist_ok=True)
        tmp = f"{path}.{os.getpid()}.{secrets.token_hex(4)}"
        with open(tmp, "x", encoding="utf-8") as fh:
            fh.write(HEADER_TEXT)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)  # whole or absent: a build reading it meanwhile sees one or the other
    except OSError:
        return None
    return folder


def _reads(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read(len(HEADER_TEXT) + 1)
    except (OSError, UnicodeDecodeError):
        return None
