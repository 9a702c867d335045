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

**Lean** (the default, ``KB_SLIM_CU_HEADERS=2``; ``1`` keeps the slim header alone). Measured on the
H200 host by the GPU acceptance check (run 11): 15 of 15 CUDA builds lean, none built again, the
``.cu`` object's median 20.7 s against 33.3 s slim (run 10), the whole build's 24.6 s against 37.0. ``torch/types.h`` is
itself ATen's every operator (``ATen/ATen.h``: ``ATen/Functions.h``, some 2,000 operator headers) and
torch's autograd factories: about 345,000 preprocessed lines. The field's 410 CUDA sources use, of
torch in their ``.cu``, ``torch::Tensor`` and its methods, ``TensorOptions``, the dtype and device
names, and six functions (``zeros``, ``zeros_like``, ``empty``, ``empty_like``, ``mean``, ``sqrt``).
So the folder also holds a ``torch/types.h`` that, in a CUDA compile, declares ``at::Tensor``
(``ATen/core/Tensor.h``, its arithmetic operators and indexing), ``AT_DISPATCH_*`` and the factories and operators
in ``LEAN_OPS``, with
the names ``torch/types.h`` puts in ``torch`` (``using namespace at`` and the dtype constants); any
other compile gets the real header (``#include_next``; the C++ wrapper's includes are its own).
``torch::zeros`` and the others are then ATen's (``at::zeros``), not the autograd factories: the same
tensor, made without the ``requires_grad`` bookkeeping that a ``.cu`` function's outputs never use. A
source that needs another operator fails to compile and is built again with the real header, as
above. On a 2-core machine (CPU torch's headers, nvcc 13.0, one field kernel, twice each), the
``.cu`` compile took 37.4-38.7 s with the slim header and 19.3-20.7 s lean, and the two objects'
device code (``.nv_fatbin``) was the same byte for byte.

**The operators' own headers, light.** Every generated ``ATen/ops/<name>.h`` first includes ATen's
context, device guard, tensor utilities and tracer, and through them ``c10::List``, ``IValue`` and the
JIT's types; ``ATen/TensorIndexing.h`` includes ``c10::List`` itself. Those templates were half of what
the three front ends parsed: on the 2-core machine (L2 P14's field kernel, ``nvcc --time``) cudafe++
6.7 s, cicc 7.0 s and the host compile 6.7 s lean, 3.6, 3.0 and 2.8 s without them (the whole ``.cu``
22.1 s, then 10.9 s). So the lean folder also holds, for each operator of ``LEAN_OPS``, an
``ATen/ops/<name>.h`` that in a CUDA compile is torch's own header's functions (read from the
installed torch's header when the folder is written) after only the includes they use (the Tensor,
its options, ``Scalar``); in any other compile the real header. The Tensor's indexing
(``x.index({b, c})``, one of the field's 413 kernels) is left out: such a source is built again with
the real header.

**The wrapper, lean too.** The lean folder's ``torch/extension.h`` gives a C++ compile (the wrapper
``main.cpp``) the Tensor, torch's pybind11 casters and ``torch::wrap_pybind_function`` (``LEAN_HOST_INCLUDES``)
instead of torch's whole header: the field's 411 wrappers declare the ``.cu`` file's functions and bind
them, nothing else. torch's header costs the wrapper more than its parse: gcc instantiates, at the end
of the compile, every template that its C++ frontend's inline functions use (14.1 s of a 2-core
machine's ``main.o`` even with the precompiled header; 74 % of it that instantiation, ``-ftime-report``);
lean, 6.0 s without any precompiled header. So a lean build has none (the precompiled header is of
torch's whole one, and would stand in for the lean one) and waits for none; a source the lean wrapper
does not compile is built again with the real headers (``stage._build_slim_then_full``), with the
precompiled ones if they are made.

Layout: ``<build_cache_dir>/.pch/<level>-cu-<digest>/include/`` (``torch/extension.h``; lean also
``torch/types.h`` and ``ATen/ops/<name>.h``), the digest that of the folder's text, so that another
torch (whose operator headers differ) or another text is another folder. Written once (root owns
``.pch``: kernels read it, never write it), never rewritten while its text is right: ninja's
dependency records name it, and a newer file would make every entry built with it out of date.
``KB_SLIM_CU_HEADERS=0`` turns both off.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import os
import secrets

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


#: What the lean folder's ``torch/extension.h`` gives a C++ compile: the Tensor, torch's pybind11 casters
#: and ``torch::wrap_pybind_function``, which is all the wrapper ``load_inline`` writes (``main.cpp``: the
#: ``cpp_sources``, then ``PYBIND11_MODULE``) uses when its ``cpp_sources`` declare the ``.cu`` file's
#: functions, as every field kernel's do. torch's whole header also brings its C++ frontend, whose
#: templates gcc instantiates at the end of every compile that includes it, used or not.
LEAN_HOST_INCLUDES = ("<ATen/core/Tensor.h>", "<torch/csrc/utils/pybind.h>", "<torch/csrc/Exceptions.h>")


#: The factories and operators the lean ``torch/types.h`` declares (``ATen/ops/<name>.h`` each): those
#: the field's ``.cu`` files call, and the common ones beside them.
LEAN_OPS = ("empty", "empty_like", "empty_strided", "zeros", "zeros_like", "ones", "ones_like", "full", "full_like",
            "arange", "mean", "sum", "sqrt", "exp", "abs", "pow", "clamp", "max", "min", "where", "matmul", "mm",
            "bmm", "addmm", "relu", "sigmoid", "tanh", "softmax", "cat", "stack")  # fmt: skip
#: torch/types.h's own names in ``torch`` (torch 2.x), for a CUDA compile.
TORCH_NAMES = """namespace torch {
using namespace at;  // NOLINT
using std::nullopt;
using std::optional;
using Dtype = at::ScalarType;
constexpr auto kUInt8 = at::kByte;
constexpr auto kInt8 = at::kChar;
constexpr auto kInt16 = at::kShort;
constexpr auto kInt32 = at::kInt;
constexpr auto kInt64 = at::kLong;
constexpr auto kUInt16 = at::kUInt16;
constexpr auto kUInt32 = at::kUInt32;
constexpr auto kUInt64 = at::kUInt64;
constexpr auto kFloat16 = at::kHalf;
constexpr auto kFloat32 = at::kFloat;
constexpr auto kFloat64 = at::kDouble;
constexpr auto kU8 = kUInt8;
constexpr auto kU16 = kUInt16;
constexpr auto kU32 = kUInt32;
constexpr auto kU64 = kUInt64;
constexpr auto kI8 = kInt8;
constexpr auto kI16 = kInt16;
constexpr auto kI32 = kInt32;
constexpr auto kI64 = kInt64;
constexpr auto kF16 = kFloat16;
constexpr auto kF32 = kFloat32;
constexpr auto kF64 = kFloat64;
}  // namespace torch
"""
LEAN_TYPES_TEXT = (
    "/* The harness's stand-in for torch/types.h (evaluation/builds/slim_headers.py): a CUDA source gets\n"
    "   at::Tensor, the dispatch macros and a few operators; anything else gets the real header. A source\n"
    "   that needs more is built again with the real one. */\n"
    "#pragma once\n#if defined(__CUDACC__)\n#include <optional>\n#include <ATen/core/Tensor.h>\n#include <ATen/Dispatch.h>\n"
    + "".join(f"#include <ATen/ops/{name}.h>\n" for name in LEAN_OPS)
    # The Tensor's arithmetic operators (x / y): their header includes every operator unless told the
    # build has per-operator headers, and then only the one it uses.
    + "#ifndef AT_PER_OPERATOR_HEADERS\n#define AT_PER_OPERATOR_HEADERS\n#define KB_LEAN_PER_OPERATOR\n#endif\n"
    + "#include <ATen/TensorOperators.h>\n"
    + "#ifdef KB_LEAN_PER_OPERATOR\n#undef AT_PER_OPERATOR_HEADERS\n#undef KB_LEAN_PER_OPERATOR\n#endif\n"
    + TORCH_NAMES
    + "#else\n#include_next <torch/types.h>\n#endif\n"
)
LEAN_HEADER_TEXT = (
    "/* The harness's stand-in for torch/extension.h (evaluation/builds/slim_headers.py): a CUDA source gets\n"
    "   torch/types.h; a C++ one the Tensor and torch's Python bindings. A source that needs more is built\n"
    "   again with the real header. */\n"
    "#pragma once\n#if defined(__CUDACC__)\n#include <torch/types.h>\n#else\n"
    + "".join(f"#include {h}\n" for h in LEAN_HOST_INCLUDES)
    + TORCH_NAMES
    + "#endif\n"
)
#: What a light operator header includes before torch's own functions of the operator.
OP_INCLUDES = ("<optional>", "<string_view>", "<ATen/core/Tensor.h>", "<c10/core/Scalar.h>",
               "<c10/core/TensorOptions.h>")  # fmt: skip


def op_header_text(name: str, real: str) -> str:
    """``ATen/ops/<name>.h`` for the lean folder, from torch's own header ``real``: in a CUDA compile its
    functions after ``OP_INCLUDES`` and its ``<name>_ops.h``, none of its other includes; else the real one."""
    own_ops = f"<ATen/ops/{name}_ops.h>"
    body = [line for line in real.splitlines()
            if line.strip() != "#pragma once" and not (line.startswith("#include") and own_ops not in line)]
    return ("/* The harness's light stand-in for this operator's header (evaluation/builds/slim_headers.py). */\n"
            "#pragma once\n#if defined(__CUDACC__)\n" + "".join(f"#include {h}\n" for h in OP_INCLUDES)
            + "\n".join(body) + f"\n#else\n#include_next <ATen/ops/{name}.h>\n#endif\n")


def torch_include() -> str | None:
    """The installed torch's header folder, found without importing torch (the parent never does)."""
    try:
        spec = importlib.util.find_spec("torch")
    except (ImportError, ValueError):
        return None
    for root in (spec.submodule_search_locations or []) if spec else []:
        if os.path.isdir(os.path.join(root, "include", "ATen")):
            return os.path.join(root, "include")
    return None


@functools.lru_cache(maxsize=8)
def files(level_name: str, torch_headers: str | None) -> dict[str, str]:
    """The folder's files of ``level_name`` (paths under ``include/``, and their text). An operator whose
    header torch lacks keeps torch's (the source still compiles, only slower)."""
    if level_name != "lean":
        return {"torch/extension.h": HEADER_TEXT}
    out = {"torch/extension.h": LEAN_HEADER_TEXT, "torch/types.h": LEAN_TYPES_TEXT}
    if torch_headers is None:
        return out
    for name in LEAN_OPS:
        try:
            with open(os.path.join(torch_headers, "ATen", "ops", f"{name}.h"), encoding="utf-8") as fh:
                out[f"ATen/ops/{name}.h"] = op_header_text(name, fh.read())
        except (OSError, UnicodeDecodeError):
            continue
    return out


def _digest(texts: dict[str, str]) -> str:
    h = hashlib.sha256()
    for path in sorted(texts):
        h.update(f"{path}\0{texts[path]}\0".encode())
    return h.hexdigest()[:12]


def level() -> str:
    """``lean`` (the default, ``KB_SLIM_CU_HEADERS=2``), ``slim`` (``=1``) or "" (``=0``: torch's own headers)."""
    return {"0": "", "1": "slim"}.get(os.environ.get("KB_SLIM_CU_HEADERS", "2"), "lean")


def enabled(device: str) -> bool:
    return device == "cuda" and level() != ""


def include_dir(cache_root: str) -> str:
    return os.path.join(cache_root, ".pch", _folder_name(level(), torch_include()), "include")


def forget() -> None:
    """Read torch's headers again on next use (they are cached for the process's life)."""
    files.cache_clear()
    _folder_name.cache_clear()


@functools.lru_cache(maxsize=8)
def _folder_name(level_name: str, torch_headers: str | None) -> str:
    # Hashing some hundred kilobytes of header text once per build would be waste: the texts are fixed
    # for a (level, torch) pair within a process, as files() already assumes.
    return f"{level_name}-cu-{_digest(files(level_name, torch_headers))}"


def ensure(cache_root: str) -> str | None:
    """The folder to name in ``CPATH``, its files written if they are not there yet; None if they cannot be."""
    folder = include_dir(cache_root)
    for name, text in files(level(), torch_include()).items():
        path = os.path.join(folder, name)
        if _reads(path, text) == text:
            continue
        try:
            os.makedirs(os.path.dirname(path), mode=0o755, exist_ok=True)
            tmp = f"{path}.{os.getpid()}.{secrets.token_hex(4)}"
            with open(tmp, "x", encoding="utf-8") as fh:
                fh.write(text)
            os.chmod(tmp, 0o644)
            os.replace(tmp, path)  # whole or absent: a build reading it meanwhile sees one or the other
        except OSError:
            return None
    return folder


def _reads(path: str, text: str) -> str | None:
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read(len(text) + 1)
    except (OSError, UnicodeDecodeError):
        return None
