"""nvcc's own steps for one ``.cu``, the device chain beside the host chain (``evaluation/builds/nvcc_split``).

nvcc runs its steps one after the other: the host side's preprocessing and cudafe++ (which writes
the translation unit's module id), then the device side's preprocessing, cicc (which reads that
id), ptxas and fatbinary, then the host compile. cudafe++ and cicc each parse everything the
``.cu`` includes, so they are most of a build's critical path. cicc can write the module id itself
(``--gen_module_id_file``), the same id from the same source, so the two chains need not wait on
each other. This shim, named as the build's nvcc (``PYTORCH_NVCC``), asks nvcc for its steps
(``--dryrun``, into a folder of its own beside the object), runs the two chains side by side, checks
that both wrote the same module id (else runs cicc's chain again with cudafe++'s, as nvcc would),
then runs the host compile: the same commands as nvcc's, so the same object. Anything of another
shape (several architectures, relocatable device code, ...) is handed to nvcc itself.

``--generate-dependencies-with-compile`` (torch's, for ninja) is done by the host preprocessing
(``-MD``): the dependency file names the object and what the source includes. Standard library
only: it runs in the build's sandbox. ``KB_NVCC_SPLIT=1`` turns it on (``build_env``); off by
default until measured on the GPU host (``benchmarks/gpu/build_phases.sh``, cut ``split_steps``).
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass

SHIM = os.path.join(os.path.dirname(os.path.abspath(__file__)), "nvcc_split")
#: Options that change which steps nvcc runs: their compiles go to nvcc itself.
OTHER_SHAPES = ("--dryrun", "-dryrun", "--keep", "-keep", "--keep-dir", "-keep-dir", "-rdc", "--relocatable-device-code",
                "-dc", "--device-c", "-dw", "--device-w", "-E", "-M", "-MM", "--time", "-time", "-lib", "--lib",
                "-ptx", "--ptx", "-cubin", "--cubin", "-fatbin", "--fatbin", "-link", "--link", "-G", "--device-debug")
DEPS_FLAG = "--generate-dependencies-with-compile"
DEPS_OUT = "--dependency-output"
_ASSIGNMENT = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=")
_MODULE_ID = re.compile(r'--module_id_file_name "([^"]+)"')


def enabled() -> bool:
    return os.environ.get("KB_NVCC_SPLIT", "0") == "1"


def real_nvcc() -> str:
    """The nvcc torch would call (CUDA_HOME's, else the one on PATH)."""
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    if home and os.path.exists(os.path.join(home, "bin", "nvcc")):
        return os.path.join(home, "bin", "nvcc")
    return shutil.which("nvcc") or os.path.join("/usr/local/cuda", "bin", "nvcc")


def build_env(device: str) -> dict[str, str]:
    """What build and kernel processes get when it is on (ninja's command names the shim in both)."""
    if device != "cuda" or not enabled():
        return {}
    return {"PYTORCH_NVCC": SHIM, "KB_REAL_NVCC": real_nvcc(), "KB_NVCC_PYTHON": sys.executable}


@dataclass
class Plan:
    """nvcc's steps for one compile, as shell lines: its variables, the two chains, the host compile."""

    variables: dict[str, str]
    host: list[str]
    device: list[str]
    device_own_id: list[str]  # the device chain as nvcc runs it (reading cudafe++'s id)
    compile: str
    steps_dir: str
    module_id: str
    deps: tuple[str, str] | None  # (what the host preprocessing writes, the dependency file asked for)


def _value(argv: list[str], flag: str) -> str:
    i = argv.index(flag)
    return argv[i + 1] if i + 1 < len(argv) else ""


def _strip_deps(argv: list[str]) -> tuple[list[str], str]:
    """``argv`` without torch's dependency options, and the dependency file they ask for ("" if none)."""
    if DEPS_FLAG not in argv:
        return argv, ""
    if DEPS_OUT not in argv:
        return argv, "?"
    dep_out = _value(argv, DEPS_OUT)
    i = argv.index(DEPS_OUT)
    return [a for j, a in enumerate(argv) if a != DEPS_FLAG and j not in (i, i + 1)], dep_out


def _tool(line: str) -> str:
    first = shlex.split(line)[0] if line.strip() else ""
    return os.path.basename(first)


def plan_for(nvcc: str, argv: list[str]) -> Plan | None:
    """The steps of a one-``.cu`` compile (``-c``, ``-o``), or None for any other shape."""
    if "-c" not in argv or "-o" not in argv or any(a.split("=")[0] in OTHER_SHAPES for a in argv):
        return None
    if sum(a.endswith(".cu") for a in argv) != 1:
        return None
    args, dep_out = _strip_deps(argv)
    if dep_out == "?":
        return None
    out = _value(args, "-o")
    steps_dir = f"{out}.nvcc-steps"
    dry = subprocess.run([nvcc, *args, "--dryrun", "--keep", "--keep-dir", steps_dir], capture_output=True,
                         text=True, timeout=120)
    lines = [ln[3:].rstrip() for ln in (dry.stderr + dry.stdout).splitlines() if ln.startswith("#$ ")]
    if dry.returncode != 0 or not lines:
        return None
    return _plan_from(lines, steps_dir, out, dep_out)


def _plan_from(lines: list[str], steps_dir: str, out: str, dep_out: str) -> Plan | None:
    steps = [ln for ln in lines if not _ASSIGNMENT.match(ln)]
    by_tool: dict[str, list[str]] = {}
    for ln in steps:
        tool = _tool(ln)
        if tool in ("gcc", "g++", "c++", "cc", "clang", "clang++") or tool.endswith(("-gcc", "-g++")):
            tool = "pp_device" if " -E " in ln and "-D__CUDA_ARCH__=" in ln else "pp_host" if " -E " in ln else "cc"
        by_tool.setdefault(tool, []).append(ln)
    wanted = ("pp_host", "cudafe++", "pp_device", "cicc", "ptxas", "fatbinary", "cc")
    if sorted(by_tool) != sorted(wanted) or any(len(v) != 1 for v in by_tool.values()):
        return None
    cudafe, cicc = by_tool["cudafe++"][0], by_tool["cicc"][0]
    ids = _MODULE_ID.findall(cudafe)
    if "--gen_module_id_file" not in cudafe or len(ids) != 1 or _MODULE_ID.findall(cicc) != ids:
        return None
    own_id = cicc.replace(f'--module_id_file_name "{ids[0]}"', f'--gen_module_id_file --module_id_file_name "{ids[0]}.cicc"')
    host_pp = by_tool["pp_host"][0]
    deps = None
    if dep_out:
        written = os.path.join(steps_dir, "deps.d")
        host_pp += f" -MD -MF {shlex.quote(written)} -MT {shlex.quote(out)}"
        deps = (written, dep_out)
    return Plan(_variables(lines), [host_pp, cudafe], [by_tool["pp_device"][0], own_id, by_tool["ptxas"][0],
                by_tool["fatbinary"][0]], [cicc, by_tool["ptxas"][0], by_tool["fatbinary"][0]],
                by_tool["cc"][0], steps_dir, ids[0], deps)


def _variables(lines: list[str]) -> dict[str, str]:
    """nvcc's variables as its steps see them (``CICC_PATH``, ``PATH``, ...), taken as written: the
    steps name them (``"$CICC_PATH/cicc"``) but the values are not shell words (``"-isystem" "..."``)."""
    found = {}
    for ln in lines:
        m = _ASSIGNMENT.match(ln)
        if m:
            value = ln[m.end():].strip()
            found[m.group(1)] = value[1:-1] if len(value) > 1 and value[0] == value[-1] == '"' else value
    return found


def _start(plan: Plan, commands: list[str]) -> subprocess.Popen[bytes]:
    script = "\n".join(["set -e", *commands])
    return subprocess.Popen(["sh", "-c", script], env={**os.environ, **plan.variables}, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT)


def _same_id(plan: Plan) -> bool:
    try:
        with open(plan.module_id, "rb") as a, open(plan.module_id + ".cicc", "rb") as b:
            return a.read() == b.read()
    except OSError:
        return False


def run_plan(plan: Plan) -> int:
    """Both chains side by side, then the host compile; nvcc's messages in nvcc's order."""
    os.makedirs(plan.steps_dir, exist_ok=True)
    try:
        host, device = _start(plan, plan.host), _start(plan, plan.device)
        host_out, device_out = host.communicate()[0], device.communicate()[0]
        sys.stderr.buffer.write(host_out)
        if host.returncode != 0:  # nvcc stops here: the device chain's messages would be its second word
            return host.returncode
        if device.returncode != 0 or not _same_id(plan):  # as nvcc runs it: cicc reads cudafe++'s id
            again = _start(plan, plan.device[:1] + plan.device_own_id)
            device_out = again.communicate()[0]
            if again.returncode != 0:
                sys.stderr.buffer.write(device_out)
                return again.returncode
        sys.stderr.buffer.write(device_out)
        last = _start(plan, [plan.compile])
        sys.stderr.buffer.write(last.communicate()[0])
        if last.returncode == 0 and plan.deps:
            shutil.copyfile(*plan.deps)
        return last.returncode
    finally:
        sys.stderr.flush()
        shutil.rmtree(plan.steps_dir, ignore_errors=True)


def main() -> None:
    nvcc = os.environ.get("KB_REAL_NVCC") or "nvcc"
    argv = sys.argv[1:]
    try:
        plan = plan_for(nvcc, argv)
    except (OSError, ValueError, subprocess.SubprocessError):
        plan = None
    if plan is None:
        os.execvp(nvcc, [nvcc, *argv])
    sys.exit(run_plan(plan))


if __name__ == "__main__":
    main()
