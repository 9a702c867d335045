"""Where a CUDA build's time goes on the GPU host, and what each candidate cut saves: driven by
benchmarks/gpu/build_phases.sh (no Django; the repository and the field checkout only).

Steps, under one time budget (``--budget-s``; whatever it cuts is reported as skipped):

1. **Reference builds.** Each field kernel is imported with no GPU visible, in the environment the
   build stage gives a build process's first try (``build_stage.build_env``: the target architecture,
   the lean folder, and the precompiled headers where the level is not lean and they are ready), so
   torch's ``load_inline`` writes
   the very commands our builds run; nvcc's own ``--time`` records its phases (``NVCC_APPEND_FLAGS``,
   which is not part of ninja's commands). The host's precompiled headers are made meanwhile, by
   the build code (``HeaderCache.ensure``).
2. **Cuts.** The ``.cu`` command (``ninja -t commands``) is run again per cut (``nvcc_cuts.CUTS``),
   side by side on the host's cores, each with ``--time``, then linked with the reference's
   ``main.o``; the wrapper is compiled again lean (the lean folder alone, as a lean build's) and with
   torch's whole header precompiled (the precompiled headers alone).
3. **Bits.** Every variant's extension is loaded and run once on fixed inputs on the GPU
   (``build_phases_check.py``); its outputs' bytes are compared with the reference build's.

Writes ``build_phases.json`` and prints a table. ``python benchmarks/gpu/build_phases.py OUT_DIR``
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, REPO)
sys.path.insert(0, HERE)

os.environ["KB_UNITS"] = "0"  # the compiler itself, not the unit server's shim: nothing serves units here
os.environ.pop("KB_CU_HOST_OPT", None)  # the reference is the kernel's own level (cut host_O0: the switch's)

from nvcc_cuts import ATEN_HEADER, CUTS, Cut, apply_cut, ninja_commands, output_of, parse_nvcc_time  # noqa: E402

from evaluation.builds import nvcc_steps, pch  # noqa: E402
from evaluation.builds.slim_headers import include_dir as slim_include_dir  # noqa: E402
from evaluation.builds.stage import build_env, header_cache_for, lean_first, ninja_steps, target_arch  # noqa: E402
from evaluation.results.types import EvaluationConfig  # noqa: E402

FIELD = os.path.join(REPO, ".field", "KernelBenchLeaderboard", "docs", "assets")
#: (level, problem, file): four field kernels of the acceptance check's set, all ``load_inline``
#: with ``torch/extension.h`` in the ``.cu``; two share the module name ``fused_ops``; one passes -O3.
KERNELS: tuple[tuple[int, int, str], ...] = (
    (2, 14, "3b400dd6bfedc298e2d95b1b95b73c6f"),  # claude-3.5-sonnet
    (1, 12, "ff38bafb4225e9c1c23dea2ec66dfaa8"),  # gpt-o1
    (2, 20, "ecce74df42226c991c533ae3ede3de06"),  # claude-3.5-sonnet
    (2, 26, "b91851ffff9d8a5b6b5f17213b590578"),  # gpt-o1, extra_cuda_cflags -O3
)
#: Seconds kept at the end for the GPU checks and the report.
CHECK_RESERVE_S = 25.0
#: The wrapper's compiles are queued after this many cuts (the headers are being made until then).
MAIN_JOBS_AFTER = 2
#: Seconds a wrapper compile is expected to take without the precompiled headers (37.5 s on the H200).
MAIN_ESTIMATE_S = 40.0


def run_bounded(argv: list[str], cwd: str, env: dict[str, str], deadline: float) -> dict[str, Any]:
    """Run ``argv`` in a session of its own until ``deadline`` at most (then its whole group is
    killed): exit code, seconds, the end of its output."""
    left = deadline - time.monotonic()
    if left < 1:
        return {"rc": None, "seconds": 0.0, "error": "skipped: out of time"}
    t0 = time.monotonic()
    try:
        proc = subprocess.Popen(
            argv,
            cwd=cwd,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            text=True,
            errors="replace",
        )
    except OSError as exc:
        return {"rc": None, "seconds": 0.0, "error": f"could not start: {exc}"}
    try:
        out, _ = proc.communicate(timeout=left)
        timed_out = False
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        timed_out = True
    row: dict[str, Any] = {"rc": proc.returncode, "seconds": round(time.monotonic() - t0, 3)}
    if timed_out:
        row["error"] = "killed: the run's time budget ended"
    elif proc.returncode != 0:
        row["error"] = (out or "")[-1500:]
    row["output"] = (out or "")[-3000:]
    return row


class Run:
    """One run of the script: the configuration, the deadline, the work folder, what was measured."""

    def __init__(self, out_dir: str, budget_s: float, slots: int) -> None:
        self.out = out_dir
        self.work = os.path.join(out_dir, "work")
        self.deadline = time.monotonic() + budget_s
        self.slots = slots
        self.cfg = EvaluationConfig(device="cuda", build_cache_dir=os.path.join(self.work, "cache"))
        self.arch = target_arch(self.cfg)
        self.aten_dir = os.path.join(self.work, "aten_header", "include")
        self.report: dict[str, Any] = {"budget_s": budget_s, "slots": slots, "arch": self.arch, "kernels": {}}

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def env(self, header: str = "slim", **extra: str) -> dict[str, str]:
        """A build process's environment (``build_stage.build_env``), the ``.cu`` header swapped."""
        first_try = build_env(self.cfg, slim_cu=True, headers=not lean_first(self.cfg))
        env = {**os.environ, **first_try, "CUDA_VISIBLE_DEVICES": "", **extra}
        slim = slim_include_dir(self.cfg.build_cache_dir)
        parts = [p for p in env.get("CPATH", "").split(os.pathsep) if p]
        if header == "full":
            parts = [p for p in parts if p != slim]
        elif header == "aten":
            parts = [self.aten_dir if p == slim else p for p in parts]
        env["CPATH"] = os.pathsep.join(parts)
        return env


def host_facts() -> dict[str, Any]:
    """The conditions of the measurement (STYLE: a measurement says where it was taken)."""

    def first_line(argv: list[str]) -> str:
        try:
            r = subprocess.run(argv, capture_output=True, text=True, timeout=30)
            lines = [ln for ln in (r.stdout or r.stderr).splitlines() if ln.strip()]
            return lines[-1].strip() if lines else ""
        except (OSError, subprocess.SubprocessError):
            return ""

    import torch  # deferred: the driver's own process needs it only here

    return {
        "cores": len(os.sched_getaffinity(0)),
        "torch": torch.__version__,
        "python": sys.version.split()[0],
        "gpu": first_line(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"]),
        "nvcc": first_line(["nvcc", "--version"]),
        "gcc": first_line(["c++", "-dumpfullversion"]),
        "load_before": os.getloadavg()[0],
    }


# -- 1. reference builds --------------------------------------------------------------------------
def reference_build(run: Run, level: int, problem: int, file: str) -> dict[str, Any]:
    """Import the kernel with no GPU, as the build stage does, and read back ninja's commands."""
    kdir = os.path.join(run.work, file)
    os.makedirs(os.path.join(kdir, "torch_extensions"), exist_ok=True)
    kernel = os.path.join(FIELD, "solutions", file + ".py")
    times = os.path.join(kdir, "reference_time.csv")
    env = run.env(TORCH_EXTENSIONS_DIR=os.path.join(kdir, "torch_extensions"))
    env["NVCC_APPEND_FLAGS"] = f"{env.get('NVCC_APPEND_FLAGS', '')} --time {times}".strip()
    row = run_bounded(
        [sys.executable, "-c", f"exec(open({kernel!r}).read())"], kdir, env, run.deadline - CHECK_RESERVE_S
    )
    info: dict[str, Any] = {
        "level": level,
        "problem": problem,
        "file": file,
        "wall_s": row["seconds"],
        "ok": row["rc"] == 0,
        "error": row.get("error", "")[-800:],
        "ninja_s": ninja_steps(kdir),
        "headers_cpath": env.get("CPATH", ""),
    }
    info["nvcc"] = _read_time(times)
    ext = _extension_dir(kdir)
    info["ext_dir"] = ext
    if ext:
        ninja = shutil.which("ninja") or os.path.join(os.path.dirname(sys.executable), "ninja")  # torch's
        listed = subprocess.run([ninja, "-C", ext, "-t", "commands"], capture_output=True, text=True)
        cmds = ninja_commands(listed.stdout)
        info["commands"] = {"cu": cmds.cu, "main": cmds.main, "link": cmds.link}
        info["so"] = os.path.join(ext, output_of(cmds.link)) if cmds.link else ""
        info["module"] = os.path.splitext(output_of(cmds.link))[0] if cmds.link else ""
        if cmds.cu:
            dry = subprocess.run([*cmds.cu, "--dryrun"], cwd=ext, capture_output=True, text=True, env=env)
            info["dryrun"] = (dry.stderr + dry.stdout)[-20000:]
    return info


def _extension_dir(kdir: str) -> str:
    root = os.path.join(kdir, "torch_extensions")
    names = [n for n in sorted(os.listdir(root)) if os.path.isdir(os.path.join(root, n))] if os.path.isdir(root) else []
    return os.path.join(root, names[0]) if names else ""


def _read_time(path: str) -> dict[str, Any]:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            text = fh.read()
    except OSError:
        return {}
    return {**parse_nvcc_time(text), "raw": text[-6000:]}


# -- 2. cuts ------------------------------------------------------------------------------------
def cut_job(run: Run, info: dict[str, Any], cut: Cut, estimate_s: float) -> dict[str, Any]:
    """The ``.cu`` compiled with ``cut`` (timed by nvcc), then linked with the reference's ``main.o``."""
    cmds = info.get("commands") or {}
    if not cmds.get("cu"):
        return {"error": "no reference build"}
    argv = apply_cut(cmds["cu"], cut, run.arch)
    if cut.name != "base" and cut.header == "slim" and argv == cmds["cu"] and not cut.split:
        return {"skipped": "the same command as the build's"}
    if run.left() < estimate_s + CHECK_RESERVE_S:
        return {"skipped": "out of time"}
    vdir = os.path.join(os.path.dirname(info["ext_dir"]), "..", "variants", cut.name)
    vdir = os.path.normpath(vdir)
    os.makedirs(vdir, exist_ok=True)
    times = os.path.join(vdir, "time.csv")
    changed = sorted(set(argv) ^ set(cmds["cu"]))
    env = run.env(cut.header)
    if cut.split:  # the build's shim, as KB_NVCC_SPLIT=1 names it (it hands a --time compile to nvcc)
        env.update(KB_REAL_NVCC=argv[0], KB_NVCC_PYTHON=sys.executable)
        argv = [nvcc_steps.SHIM, *argv[1:]]
    else:
        argv = [*argv, "--time", times]
    row = run_bounded(argv, vdir, env, run.deadline - CHECK_RESERVE_S / 2)
    result: dict[str, Any] = {
        "cu_s": row["seconds"],
        "ok": row["rc"] == 0,
        "nvcc": _read_time(times),
        "argv_changed": changed,
        "header": cut.header,
        "split": cut.split,
    }
    if row.get("error"):
        result["error"] = row["error"][-800:]
        return result
    result.update(_link(run, info, vdir, main_from=info["ext_dir"], cu_from=vdir))
    return result


def main_job(run: Run, info: dict[str, Any], with_headers: bool) -> dict[str, Any]:
    """The wrapper compiled again, with the host's precompiled headers (torch's whole header) or lean
    (the lean folder alone), and linked."""
    cmds = info.get("commands") or {}
    if not cmds.get("main"):
        return {"error": "no reference build"}
    headers = header_cache_for(run.cfg)
    waited = time.monotonic()
    if with_headers:  # wait for them while a compile still fits (the build stage waits too)
        headers.ensure(wait_s=max(0.0, run.left() - CHECK_RESERVE_S - MAIN_ESTIMATE_S / 2))
    if with_headers and not headers.ready:
        return {"skipped": "the precompiled headers were not ready", "headers_failure": headers.failure()}
    waited = time.monotonic() - waited
    env = {**run.env(), "CPATH": headers.include_dir if with_headers else slim_include_dir(run.cfg.build_cache_dir)}
    name = "main_pch" if with_headers else "main_lean"
    vdir = os.path.normpath(os.path.join(info["ext_dir"], "..", "..", "variants", name))
    os.makedirs(vdir, exist_ok=True)
    row = run_bounded(cmds["main"], vdir, env, run.deadline - CHECK_RESERVE_S / 2)
    result: dict[str, Any] = {
        "main_s": row["seconds"],
        "ok": row["rc"] == 0,
        "cpath": env.get("CPATH", ""),
        "headers_wait_s": round(waited, 1),
    }
    if row.get("error"):
        result["error"] = row["error"][-800:]
        return result
    result.update(_link(run, info, vdir, main_from=vdir, cu_from=info["ext_dir"]))
    return result


def _link(run: Run, info: dict[str, Any], vdir: str, main_from: str, cu_from: str) -> dict[str, Any]:
    link = info["commands"]["link"]
    for obj, folder in (("main.o", main_from), (output_of(info["commands"]["cu"]), cu_from)):
        if folder != vdir:
            target = os.path.join(vdir, obj)
            if os.path.lexists(target):
                os.unlink(target)
            os.symlink(os.path.join(folder, obj), target)
    row = run_bounded(link, vdir, run.env(), run.deadline)
    so = os.path.join(vdir, output_of(link))
    return {"link_s": row["seconds"], "so": so if row["rc"] == 0 else "", "link_error": row.get("error", "")[-500:]}


# -- 3. bits ------------------------------------------------------------------------------------
def check_bits(run: Run, info: dict[str, Any]) -> None:
    """Run every variant once on the GPU; mark each ``bitwise`` equal to the reference or not."""
    variants = [["reference", info.get("so", ""), info.get("module", "")]]
    variants += [[name, v["so"], info["module"]] for name, v in info["variants"].items() if v.get("so")]
    if not variants[0][1]:
        return
    problem = os.path.join(FIELD, "problems", f"l{info['level']}_p{info['problem']}.py")
    kernel = os.path.join(FIELD, "solutions", info["file"] + ".py")
    env = {k: v for k, v in os.environ.items() if k not in ("CUDA_VISIBLE_DEVICES", "CPATH", "NVCC_APPEND_FLAGS")}
    row = run_bounded(
        [sys.executable, os.path.join(HERE, "build_phases_check.py"), problem, kernel, json.dumps(variants)],
        os.path.join(run.work, info["file"]),
        env,
        run.deadline,
    )
    hashes = {}
    for line in row.get("output", "").splitlines():
        try:
            got = json.loads(line)
        except ValueError:
            continue
        if isinstance(got, dict) and "variant" in got:
            hashes[got["variant"]] = got.get("hash") or f"error: {got.get('error')}"
    info["check"] = {"hashes": hashes, "error": row.get("error", "")[-800:]}
    ref = hashes.get("reference", "")
    info["deterministic"] = bool(ref) and not ref.startswith("error") and hashes.get("reference#again") == ref
    for name, v in info["variants"].items():
        got = hashes.get(name)
        v["bitwise"] = None if got is None or not ref or ref.startswith("error") else got == ref


# -- the run ------------------------------------------------------------------------------------
def measure(run: Run) -> None:
    headers = header_cache_for(run.cfg)
    headers.ensure(wait_s=0.0)  # made by the build code, side by side with the reference builds
    os.makedirs(os.path.join(run.aten_dir, "torch"), exist_ok=True)
    with open(os.path.join(run.aten_dir, "torch", "extension.h"), "w", encoding="utf-8") as fh:
        fh.write(ATEN_HEADER)
    with ThreadPoolExecutor(max_workers=len(KERNELS)) as pool:
        infos = list(pool.map(lambda k: reference_build(run, *k), KERNELS))
    for info in infos:
        info["variants"] = {}
        run.report["kernels"][info["file"]] = info
    with ThreadPoolExecutor(max_workers=run.slots) as pool:
        futures = []
        for rank, cut in enumerate(CUTS):  # cut by cut: the budget ends the least likely ones
            futures += [(info, cut.name, pool.submit(cut_job, run, info, cut, _estimate(info))) for info in infos]
            if rank == MAIN_JOBS_AFTER:
                futures += [
                    (info, name, pool.submit(main_job, run, info, name == "main_pch"))
                    for info in infos
                    for name in ("main_lean", "main_pch")
                ]
        for info, name, fut in futures:
            info["variants"][name] = fut.result()
    run.report["headers"] = {"ready": headers.ready, "failure": headers.failure(), "manifest": headers.manifest()}
    with ThreadPoolExecutor(max_workers=len(infos)) as pool:
        list(pool.map(lambda i: check_bits(run, i), infos))


def _estimate(info: dict[str, Any]) -> float:
    """Seconds a ``.cu`` compile of this kernel is expected to take: the reference build's."""
    cu = [s for k, s in (info.get("ninja_s") or {}).items() if k.endswith(".cuda.o")]
    return max(cu) if cu else 40.0


def table(report: dict[str, Any]) -> str:
    """One line per kernel and variant: seconds of the ``.cu`` (or wrapper), nvcc's phases, bits."""
    groups = ("preprocess", "cudafe++", "cicc", "ptxas", "fatbinary", "host compile")
    head = f"{'kernel':10} {'variant':16} {'total_s':>8} " + " ".join(f"{g[:12]:>12}" for g in groups) + "  bitwise"
    lines = [head]
    for file, info in report["kernels"].items():
        ref = info.get("nvcc", {}).get("groups", {})
        lines.append(
            f"{file[:10]:10} {'reference':16} {info.get('wall_s', 0):8.1f} "
            + " ".join(f"{ref.get(g, 0):12.2f}" for g in groups)
            + f"  {info.get('ninja_s', {})}"
        )
        for name, v in info.get("variants", {}).items():
            if "skipped" in v or ("error" in v and "cu_s" not in v and "main_s" not in v):
                lines.append(f"{'':10} {name:16} {v.get('skipped') or v.get('error', '')[:80]}")
                continue
            g = v.get("nvcc", {}).get("groups", {})
            total = v.get("cu_s", v.get("main_s", 0.0))
            bits = {True: "equal", False: "DIFFERENT", None: "-"}[v.get("bitwise")]
            err = "  " + v["error"].splitlines()[-1][:60] if v.get("error") else ""
            lines.append(
                f"{'':10} {name:16} {total:8.1f} " + " ".join(f"{g.get(x, 0):12.2f}" for x in groups) + f"  {bits}{err}"
            )
    return "\n".join(lines)


def stop_header_builders() -> None:
    """A header build still running when the budget ends is this run's: it goes with it."""
    for proc in list(pch._BUILDERS.values()):
        if proc.poll() is None:
            with contextlib.suppress(OSError):
                os.killpg(proc.pid, signal.SIGKILL)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--budget-s", type=float, default=float(os.environ.get("BUILD_PHASES_BUDGET_S", 150)))
    parser.add_argument(
        "--slots",
        type=int,
        default=int(os.environ.get("BUILD_PHASES_SLOTS", 0)) or max(2, len(os.sched_getaffinity(0)) - 4),
    )
    args = parser.parse_args()
    args.out = os.path.abspath(args.out)
    os.makedirs(args.out, exist_ok=True)
    shutil.rmtree(os.path.join(args.out, "work"), ignore_errors=True)
    run = Run(args.out, args.budget_s, args.slots)
    run.report["host"] = host_facts()
    t0 = time.monotonic()
    try:
        measure(run)
    except Exception as exc:  # noqa: BLE001 - what was measured is still written
        run.report["error"] = f"{type(exc).__name__}: {exc}"
    finally:
        stop_header_builders()
    run.report["seconds"] = round(time.monotonic() - t0, 1)
    run.report["load_after"] = os.getloadavg()[0]
    with open(os.path.join(args.out, "build_phases.json"), "w", encoding="utf-8") as fh:
        json.dump(run.report, fh, indent=1)
    print(table(run.report), flush=True)
    print(f"build_phases: {run.report['seconds']} s; {args.out}/build_phases.json", flush=True)


if __name__ == "__main__":
    main()
