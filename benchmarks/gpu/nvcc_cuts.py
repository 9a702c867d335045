"""The pure parts of benchmarks/gpu/build_phases.py: nvcc's own per-phase timings (``--time``), the
commands ninja runs for a ``load_inline`` build (``ninja -t commands``), and the candidate cuts of
the ``.cu`` compile, each a change of nvcc's argument list or of the header it includes.
Tested on the CPU (tests/unit/test_nvcc_cuts.py); the GPU host runs them.
"""

from __future__ import annotations

import csv
import io
import re
import shlex
from dataclasses import dataclass, field

#: nvcc's ``--time`` units, to seconds.
_UNIT_S = {"ms": 1e-3, "s": 1.0, "us": 1e-6, "ns": 1e-9}
#: The phases the issue names, by what nvcc calls the phase or its tool.
PHASE_GROUPS = ("preprocess", "cudafe++", "host compile", "cicc", "ptxas", "fatbinary", "nvlink", "other")
#: Flags that put device debug information into the object (none changes what the kernel computes).
DEVICE_DEBUG_FLAGS = frozenset({"-G", "-g", "-lineinfo", "--generate-line-info", "--device-debug"})
#: nvcc options whose next word goes to the host compiler, or to another tool.
HOST_COMPILER_PASS = frozenset({"-Xcompiler", "--compiler-options"})
TOOL_PASS = frozenset(
    {
        "-Xptxas",
        "--ptxas-options",
        "-Xcudafe",
        "-Xnvlink",
        "--nvlink-options",
        "-Xfatbin",
        "--fatbin-options",
        "-Xlinker",
        "--linker-options",
        "-Xarchive",
        "--archive-options",
    }
)
_GENCODE = re.compile(r"^(-gencode|--generate-code)(=.*)?$")
_HOST_OPT = re.compile(r"^-O[0-3s]?$")


def phase_group(phase: str, tool: str) -> str:
    """Which of ``PHASE_GROUPS`` a row of nvcc's ``--time`` belongs to."""
    text = f"{phase} {tool}".lower()
    if "preprocess" in text:
        return "preprocess"
    for name in ("cudafe++", "cicc", "ptxas", "fatbinary", "nvlink"):
        if name.rstrip("+") in text:
            return name
    if any(cc in text for cc in ("gcc", "g++", "c++", "clang", "compil")):
        return "host compile"
    return "other"


def parse_nvcc_time(text: str) -> dict[str, dict[str, float]]:
    """Seconds per phase from nvcc's ``--time`` CSV: ``{"phases": {raw phase name: s}, "groups":
    {PHASE_GROUPS name: s}}``. Columns are found by their header's names (nvcc pads them with spaces
    and some versions end rows with a comma); rows that do not parse are skipped."""
    rows = [[c.strip() for c in row] for row in csv.reader(io.StringIO(text)) if any(c.strip() for c in row)]
    phases: dict[str, float] = {}
    groups: dict[str, float] = {}
    if not rows:
        return {"phases": phases, "groups": groups}
    header = [c.lower() for c in rows[0]]
    try:
        i_phase, i_metric = header.index("phase name"), header.index("metric")
    except ValueError:
        return {"phases": phases, "groups": groups}
    i_tool = header.index("tool") if "tool" in header else None
    i_unit = header.index("unit") if "unit" in header else None
    for row in rows[1:]:
        try:
            scale = _UNIT_S.get(row[i_unit].lower(), 1e-3) if i_unit is not None else 1e-3
            seconds = float(row[i_metric]) * scale
        except (ValueError, IndexError):
            continue
        phase = row[i_phase]
        tool = row[i_tool] if i_tool is not None and i_tool < len(row) else ""
        phases[phase] = phases.get(phase, 0.0) + seconds
        group = phase_group(phase, tool)
        groups[group] = groups.get(group, 0.0) + seconds
    return {"phases": _rounded(phases), "groups": _rounded(groups)}


def _rounded(d: dict[str, float]) -> dict[str, float]:
    return {k: round(v, 3) for k, v in d.items()}


@dataclass
class NinjaCommands:
    """The three commands of a ``load_inline`` CUDA build, as argument lists (run in its folder)."""

    cu: list[str] = field(default_factory=list)
    main: list[str] = field(default_factory=list)
    link: list[str] = field(default_factory=list)


def ninja_commands(text: str) -> NinjaCommands:
    """The ``.cu`` compile, the wrapper's compile and the link from ``ninja -t commands``'s output."""
    found = NinjaCommands()
    for line in text.splitlines():
        try:
            argv = shlex.split(line)
        except ValueError:
            continue
        if not argv:
            continue
        if "-shared" in argv:
            found.link = argv
        elif any(a.endswith(".cu") for a in argv) and "-c" in argv:
            found.cu = argv
        elif any(a.endswith("main.cpp") for a in argv) and "-c" in argv:
            found.main = argv
    return found


def output_of(argv: list[str]) -> str:
    """What ``-o`` names in a command ("" when none)."""
    return argv[argv.index("-o") + 1] if "-o" in argv and argv.index("-o") + 1 < len(argv) else ""


@dataclass(frozen=True)
class Cut:
    """One candidate cut of the ``.cu`` compile: flags dropped, an nvcc ``-O`` level for the host
    side, one ``-gencode`` for the target architecture, flags added, and which ``torch/extension.h``
    the ``.cu`` sees ("slim": the build's, "full": torch's, "aten": ATen and torch's dtype names only);
    ``split``: run through the build's ``evaluation/builds/nvcc_split`` (nvcc's ``--time`` does not see it)."""

    name: str
    drop_debug: bool = False
    host_opt: str = ""
    arch_only: bool = False
    add: tuple[str, ...] = ()
    header: str = "slim"
    split: bool = False  # through evaluation/builds/nvcc_split: nvcc's steps, the two chains side by side
    why: str = ""


#: In the order they are tried (the budget may end the list early).
CUTS: tuple[Cut, ...] = (
    Cut("base", why="the build's own command, again, beside the cuts"),
    Cut("split_steps", split=True, why="nvcc's own steps, cudafe++ beside cicc (KB_NVCC_SPLIT=1)"),
    Cut("host_O0", host_opt="-O0", why="host side not optimised (device code untouched)"),
    Cut("host_O1", host_opt="-O1", why="host side lightly optimised"),
    Cut("full_header", header="full", why="torch's own extension.h: what the slim header saves"),
    Cut("aten_header", header="aten", why="a smaller host header set than torch/types.h"),
    Cut("no_device_debug", drop_debug=True, why="no -G/-lineinfo/-g"),
    Cut("arch_only", arch_only=True, why="one -gencode: the device's sm only, no PTX"),
    Cut("threads", add=("-t", "0"), why="nvcc's steps in parallel where it can"),
    Cut("cpu_safe", drop_debug=True, host_opt="-O1", arch_only=True, why="the flag cuts together"),
    Cut(
        "cpu_safe_aten",
        drop_debug=True,
        host_opt="-O1",
        arch_only=True,
        header="aten",
        why="the flag cuts and the smaller header",
    ),
)


def sm_of(arch: str) -> str:
    """``9.0`` -> ``90`` (``9.0a`` -> ``90a``; ``+PTX`` dropped)."""
    return arch.split("+")[0].replace(".", "").strip()


def apply_cut(argv: list[str], cut: Cut, arch: str) -> list[str]:
    """``argv`` (an nvcc command) with ``cut``'s flag changes (the header is the environment's)."""
    out: list[str] = []
    gencode_at = -1
    it = iter(argv)
    for a in it:
        if cut.drop_debug and a in DEVICE_DEBUG_FLAGS:
            continue
        if cut.host_opt and _HOST_OPT.match(a):
            if out and out[-1] in HOST_COMPILER_PASS:
                out.pop()  # "-Xcompiler -O3": the host's level too, dropped with its option
                continue
            if not (out and out[-1] in TOOL_PASS):  # "-Xptxas -O3" is the device's: kept
                continue
        m = _GENCODE.match(a)
        if cut.arch_only and m:
            if m.group(2) is None:
                next(it, None)  # "-gencode X": its value is the next word
            gencode_at = len(out) if gencode_at < 0 else gencode_at
            continue
        out.append(a)
    if cut.arch_only and arch:
        sm = sm_of(arch)
        out.insert(gencode_at if gencode_at >= 0 else 1, f"-gencode=arch=compute_{sm},code=sm_{sm}")
    if cut.host_opt:
        out.append(cut.host_opt)
    return out + list(cut.add)


#: The "aten" header: what torch/types.h gives a ``.cu`` less torch's autograd (torch:: names are
#: ATen's); a source that needs more does not compile, which the run reports.
ATEN_HEADER = """\
#pragma once
#if defined(__CUDACC__)
#include <ATen/ATen.h>
namespace torch {
using namespace at;
using Dtype = at::ScalarType;
constexpr auto kUInt8 = at::kByte; constexpr auto kInt8 = at::kChar; constexpr auto kInt16 = at::kShort;
constexpr auto kInt32 = at::kInt; constexpr auto kInt64 = at::kLong; constexpr auto kFloat16 = at::kHalf;
constexpr auto kFloat32 = at::kFloat; constexpr auto kFloat64 = at::kDouble;
}
#else
#include_next <torch/extension.h>
#endif
"""
