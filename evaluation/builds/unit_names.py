"""One compile of a C++ wrapper for every module name it is built under (the unit cache's keying).

``load_inline`` names the module only through a flag: ``-DTORCH_EXTENSION_NAME=<name>``, which
the wrapper's text uses once, in ``PYBIND11_MODULE(TORCH_EXTENSION_NAME, m)``. Two kernels whose
wrappers are the same text under the same flags but for that name compile to objects that differ
only in the names pybind11 gives three symbols (``PyInit_<name>``, the only global one, and the
static ``pybind11_init_<name>`` and ``pybind11_exec_<name>``) and in the def's ``m_name`` string.
Since pybind11 3, a module is initialised in two phases, and Python names it after its import spec,
never after ``m_name`` (pybind11 finds its own module by the spec's name too).

So the unit cache keys such a wrapper with the name left out (``shared_flags``), the first build
compiles it under its own name (its object is the compiler's, byte for byte), and a build under
another name is served that object with the three symbols renamed (``bind_name``, objcopy): the
same code, its entry point under the name Python looks for. Where any of this does not hold (the
text uses the name otherwise, torch's pybind11 is older, objcopy fails) the name stays in the key.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import re
import resource
import subprocess
import tempfile

from evaluation.builds.pch import _die_with_parent

NAME_FLAG = "-DTORCH_EXTENSION_NAME="
#: What the name is replaced by in the key.
ANY_NAME = "-DTORCH_EXTENSION_NAME=*"
IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,199}")
#: The name's one use in a wrapper load_inline writes.
MODULE_LINE = "PYBIND11_MODULE(TORCH_EXTENSION_NAME, m)"
#: The symbols pybind11's PYBIND11_MODULE names after the module.
SYMBOL_PREFIXES = ("PyInit_", "pybind11_init_", "pybind11_exec_")
_PYINIT = re.compile(rb"\x00PyInit_([A-Za-z0-9_]{1,200})\x00")
#: objcopy's limits: it reads an object compiled from a kernel's text, outside the sandbox, so a
#: malformed one may cost it a little memory and CPU, never the host's.
OBJCOPY_MEMORY_BYTES = 1 << 30
OBJCOPY_CPU_S = 30
OBJCOPY_WALL_S = 60
#: The largest object objcopy may write, as a multiple of the one it reads (renaming adds a few bytes).
OBJCOPY_GROWTH = 2


def module_name(flags: list[str]) -> str:
    """The module name a compile's flags give (``-DTORCH_EXTENSION_NAME=``), "" when not exactly one."""
    names = [f[len(NAME_FLAG) :] for f in flags if f.startswith(NAME_FLAG)]
    return names[0] if len(names) == 1 and IDENTIFIER.fullmatch(names[0]) else ""


def shared_flags(flags: list[str], text: str) -> list[str]:
    """``flags`` as the unit cache keys them: without the module's name where the text uses it only
    to name the module (and torch's pybind11 names modules after their spec); else unchanged."""
    name = module_name(flags)
    if not name or text.count("TORCH_EXTENSION_NAME") != 1 or MODULE_LINE not in text:
        return flags
    if any(p in text for p in SYMBOL_PREFIXES) or not spec_named_modules():
        return flags
    return [ANY_NAME if f.startswith(NAME_FLAG) else f for f in flags]


@functools.lru_cache(maxsize=1)
def spec_named_modules() -> bool:
    """Whether torch's pybind11 (3 or later) initialises modules in two phases (named by their spec)."""
    spec = importlib.util.find_spec("torch")  # not imported: the worker never imports torch
    if not spec or not spec.origin:
        return False
    header = os.path.join(os.path.dirname(spec.origin), "include", "pybind11", "detail", "common.h")
    try:
        with open(header, encoding="utf-8", errors="replace") as fh:
            m = re.search(r"#define PYBIND11_VERSION_MAJOR (\d+)", fh.read())
    except OSError:
        return False
    return m is not None and int(m.group(1)) >= 3


def compiled_name(obj: bytes) -> str:
    """The module name an object was compiled under (its one ``PyInit_`` symbol), "" if not one."""
    found = {m.group(1).decode() for m in _PYINIT.finditer(obj)}
    return found.pop() if len(found) == 1 else ""


def bind_name(obj: bytes, name: str) -> bytes | None:
    """``obj`` with its module's symbols renamed to ``name`` (unchanged when it was compiled under
    ``name``); None when that cannot be done (the build then compiles the unit itself)."""
    old = compiled_name(obj)
    if not old or not IDENTIFIER.fullmatch(name):
        return None
    if old == name:
        return obj
    renames = [arg for p in SYMBOL_PREFIXES for arg in ("--redefine-sym", f"{p}{old}={p}{name}")]
    with tempfile.TemporaryDirectory(prefix="kb-unit-name-") as tmp:
        path = os.path.join(tmp, "unit.o")
        with open(path, "wb") as fh:
            fh.write(obj)
        try:
            subprocess.run(
                ["objcopy", *renames, path],
                check=True,
                capture_output=True,
                timeout=OBJCOPY_WALL_S,
                preexec_fn=functools.partial(_objcopy_limits, OBJCOPY_GROWTH * len(obj) + (1 << 20)),
            )
            with open(path, "rb") as fh:
                renamed = fh.read()
        except (OSError, subprocess.SubprocessError):
            return None
    return renamed if compiled_name(renamed) == name else None


def _objcopy_limits(largest_file: int) -> None:
    """In objcopy, before exec: its memory, CPU and file size limits, and death with its parent."""
    for res, value in (
        (resource.RLIMIT_AS, OBJCOPY_MEMORY_BYTES),
        (resource.RLIMIT_CPU, OBJCOPY_CPU_S),
        (resource.RLIMIT_FSIZE, largest_file),
        (resource.RLIMIT_CORE, 0),
    ):
        resource.setrlimit(res, (value, value))
    _die_with_parent()
