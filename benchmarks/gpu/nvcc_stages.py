"""Where a load_inline CUDA build's time goes: build one kernel module as the build stage does (no
GPU visible, TORCH_CUDA_ARCH_LIST set), with nvcc's own per-phase timing (``--time``, passed through
NVCC_APPEND_FLAGS), once per architecture list given; print wall time, ninja's per-output seconds and
nvcc's phases.

    python benchmarks/gpu/nvcc_stages.py KERNEL.py [ARCH_LIST ...]     (default: 9.0 and 9.0+PTX)
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", ".."))

from evaluation.builds.stage import ninja_steps  # noqa: E402


def build(kernel: str, arch: str) -> dict[str, object]:
    work = tempfile.mkdtemp(prefix="kb-nvcc-")
    times = os.path.join(work, "nvcc_time.csv")
    env = {
        **os.environ,
        "CUDA_VISIBLE_DEVICES": "",
        "TORCH_CUDA_ARCH_LIST": arch,
        "TORCH_EXTENSIONS_DIR": os.path.join(work, "torch_extensions"),
        "NVCC_APPEND_FLAGS": f"--time {times}",
    }
    t0 = time.monotonic()
    r = subprocess.run(
        [sys.executable, "-c", f"exec(open({kernel!r}).read())"], env=env, capture_output=True, text=True
    )
    wall = time.monotonic() - t0
    phases: dict[str, float] = {}
    rows: list[list[str]] = []
    if os.path.exists(times):
        with open(times, newline="") as fh:
            rows = [row for row in csv.reader(fh) if row]
    for row in rows[1:]:  # the phase is the second column, its time (ms) before the unit
        try:
            phases[row[1].strip()] = phases.get(row[1].strip(), 0.0) + float(row[-2]) / 1000.0
        except (ValueError, IndexError):
            continue
    return {
        "arch": arch,
        "ok": r.returncode == 0,
        "wall_s": round(wall, 2),
        "ninja_s": ninja_steps(work),
        "nvcc_phases_s": {k: round(v, 2) for k, v in phases.items()},
        "nvcc_header": rows[0] if rows else [],
        "error": r.stderr[-500:] if r.returncode else "",
    }


def main() -> None:
    kernel = sys.argv[1]
    for arch in sys.argv[2:] or ["9.0", "9.0+PTX"]:
        print(json.dumps(build(kernel, arch)), flush=True)


if __name__ == "__main__":
    main()
