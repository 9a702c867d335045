#!/usr/bin/env python3
"""GPU measurements for docs/measurements.md, run on the H200 through the device tool.

    python3 benchmarks/gpu/gpu_suite.py --stage a --out $OUT   # probe, own Triton/CUDA kernels (cold and
                                                               # warm build), run-to-run spread, GPU exploits
    python3 benchmarks/gpu/gpu_suite.py --stage b --out $OUT --problems 'level1/*'   # self-check at GPU sizes

Writes JSON and logs under --out and prints a short summary last.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

from evaluation import EvaluationConfig, evaluate, probe_hardware  # noqa: E402
from evaluation.sandbox.isolation import detect_isolation  # noqa: E402

CAT = os.path.join(ROOT, "problems", "catalogue")
KER = os.path.join(ROOT, "benchmarks", "gpu", "kernels")
OWN = [
    ("level1/3_GELU.py", "gelu_triton.py", 32),
    ("level1/3_GELU.py", "gelu_cuda.py", 32),
    ("level1/8_RMSNorm.py", "rmsnorm_triton.py", 16),
    ("level1/8_RMSNorm.py", "rmsnorm_cuda.py", 16),
]


def brief(r) -> dict:
    d = r.to_dict()
    out = {
        k: d[k]
        for k in (
            "status",
            "speedup",
            "speedup_interval",
            "error",
            "timings_s",
            "build_cached",
            "backend",
            "max_abs_diff",
            "trials_passed",
        )
    }
    out["flags"] = [f["code"] for f in r.flags]
    out["kernel_ms"] = r.kernel_ms and {k: v for k, v in r.kernel_ms.items()}
    out["reference_ms"] = r.reference_ms and {k: v for k, v in r.reference_ms.items()}
    if r.status not in ("correct",):
        out["log_tail"] = r.log[-3000:]
    return out


def cfg(scale: int, cache: str, **kw) -> EvaluationConfig:
    base = dict(
        device="cuda",
        size_scale=scale,
        correctness_trials=3,
        timing_trials=20,
        round_target_s=0.02,
        timeout_s=400,
        memory_limit_mb=65536,
        build_cache_dir=cache,
    )
    base.update(kw)
    return EvaluationConfig(**base)


def record_gpu(res: dict) -> None:
    """nvidia-smi's view of the GPU, the sandbox's isolation and the library's hardware probe."""
    res["nvidia_smi"] = subprocess.run(
        [
            "nvidia-smi",
            "--query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw",
            "--format=csv",
        ],
        capture_output=True,
        text=True,
    ).stdout
    res["isolation"] = {k: v for k, v in detect_isolation().items() if k != "prefix"}
    res["probe"] = probe_hardware("cuda")
    print("probe", res["probe"], flush=True)


def sanity_check(res: dict, cache: str) -> None:
    # Sanity first: does CUDA work for the sandbox's unprivileged uid?
    gelu = open(os.path.join(CAT, "level1/3_GELU.py")).read()
    r = evaluate(gelu, gelu + "\n\nclass ModelNew(Model):\n    pass\n", cfg(32, cache, timing_trials=5))
    res["sanity"] = brief(r)
    print("sanity", r.status, r.speedup, r.error, flush=True)
    if r.status != "correct" and "CUDA" in (r.error or ""):
        os.environ["KB_SANDBOX_SWITCH_UID"] = "0"
        r = evaluate(gelu, gelu + "\n\nclass ModelNew(Model):\n    pass\n", cfg(32, cache, timing_trials=5))
        res["sanity_without_uid_switch"] = brief(r)
        print("sanity (no uid switch)", r.status, r.speedup, r.error, flush=True)


def own_kernels(res: dict, cache: str) -> None:
    """Each of OWN evaluated twice: a cold build, then a warm one from the build cache."""
    res["own_kernels"] = []
    for prob, kern, scale in OWN:
        psrc = open(os.path.join(CAT, prob)).read()
        ksrc = open(os.path.join(KER, kern)).read()
        cold = evaluate(psrc, ksrc, cfg(scale, cache))
        warm = evaluate(psrc, ksrc, cfg(scale, cache))
        res["own_kernels"].append(
            {"problem": prob, "kernel": kern, "scale": scale, "cold": brief(cold), "warm": brief(warm)}
        )
        print(
            f"{kern}: cold {cold.status} {cold.speedup} build {cold.timings_s.get('build')} | warm {warm.status} "
            f"{warm.speedup} build {warm.timings_s.get('build')} cached={warm.build_cached} {cold.error or ''}",
            flush=True,
        )


def speedup_spread(cache: str) -> list[dict]:
    # Run-to-run spread of one kernel's speedup (warm cache).
    psrc = open(os.path.join(CAT, "level1/8_RMSNorm.py")).read()
    ksrc = open(os.path.join(KER, "rmsnorm_cuda.py")).read()
    spread = []
    for _ in range(5):
        r = evaluate(psrc, ksrc, cfg(16, cache))
        spread.append(
            {
                "speedup": r.speedup,
                "ci": r.speedup_interval,
                "kernel_ms": r.kernel_ms and r.kernel_ms["median"],
                "reference_ms": r.reference_ms and r.reference_ms["median"],
                "total_s": r.timings_s.get("total"),
                "status": r.status,
            }
        )
    return spread


def gpu_exploit_tests(out: str) -> None:
    # GPU exploit tests (pytest without the Django conftest: the GPU host has no Django).
    t0 = time.time()
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--noconftest",
            "-p",
            "no:cacheprovider",
            "-q",
            "-rA",
            "-o",
            "addopts=",
            "tests/adversarial/test_exploits_gpu.py",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=500,
    )
    with open(os.path.join(out, "pytest_gpu.log"), "w") as fh:
        fh.write(p.stdout + p.stderr)
    print(p.stdout[-3000:], flush=True)
    print(f"pytest gpu: rc={p.returncode} in {time.time() - t0:.0f}s", flush=True)


def print_summary(res: dict, spread: list[dict]) -> None:
    print("\nSUMMARY")
    for k in res["own_kernels"]:
        c, w = k["cold"], k["warm"]
        print(
            f"{k['kernel']:>18}: {c['status']} speedup {c['speedup'] and round(c['speedup'], 3)} "
            f"warm {w['speedup'] and round(w['speedup'], 3)} build cold {c['timings_s'].get('build')}s "
            f"warm {w['timings_s'].get('build')}s (cached={w['build_cached']}) total cold "
            f"{c['timings_s'].get('total')}s warm {w['timings_s'].get('total')}s"
        )
    print("spread:", [round(s["speedup"], 4) if s["speedup"] else None for s in spread])


def stage_a(out: str) -> None:
    res: dict = {"started": time.time()}
    record_gpu(res)
    cache = tempfile.mkdtemp(prefix="kbcache-")
    os.chmod(cache, 0o755)
    sanity_check(res, cache)
    own_kernels(res, cache)
    spread = speedup_spread(cache)
    res["spread"] = spread
    print("spread", [s["speedup"] for s in spread], flush=True)
    with open(os.path.join(out, "stage_a.json"), "w") as fh:
        json.dump(res, fh, indent=1, default=str)
    gpu_exploit_tests(out)
    shutil.rmtree(cache, ignore_errors=True)
    print_summary(res, spread)


def stage_b(out: str, pattern: str, tag: str) -> None:
    cmd = [
        sys.executable,
        os.path.join(ROOT, "benchmarks", "evaluation_selfcheck.py"),
        "--device",
        "cuda",
        "--gpu-scale",
        "--timing-trials",
        "10",
        "--correctness-trials",
        "2",
        "--round-target",
        "0.02",
        "--problems",
        pattern,
        "--twice-only",
        "level[12]/*",
        "--json",
        os.path.join(out, f"selfcheck_{tag}.json"),
    ]
    p = subprocess.run(
        cmd, cwd=ROOT, capture_output=True, text=True, timeout=int(os.environ.get("STAGE_B_TIMEOUT", "580"))
    )
    with open(os.path.join(out, f"selfcheck_{tag}.log"), "w") as fh:
        fh.write(p.stdout + p.stderr)
    print(p.stdout[-6000:], p.stderr[-2000:])


def stage_c(out: str) -> None:
    """Run-to-run spread of one kernel (5 evaluations, per-stage wall times) and the GPU exploit tests."""
    cache = tempfile.mkdtemp(prefix="kbcache-")
    os.chmod(cache, 0o755)
    psrc = open(os.path.join(CAT, "level1/8_RMSNorm.py")).read()
    ksrc = open(os.path.join(KER, "rmsnorm_triton.py")).read()
    runs = []
    for i in range(5):
        r = evaluate(psrc, ksrc, cfg(16, cache))
        runs.append(brief(r))
        print(
            f"run {i}: {r.status} speedup {r.speedup} CI {r.speedup_interval} kernel "
            f"{r.kernel_ms and r.kernel_ms['median']} ref {r.reference_ms and r.reference_ms['median']} "
            f"timings {r.timings_s}",
            flush=True,
        )
    with open(os.path.join(out, "stage_c.json"), "w") as fh:
        json.dump({"spread_rmsnorm_triton": runs}, fh, indent=1, default=str)
    t0 = time.time()
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--noconftest",
            "-p",
            "no:cacheprovider",
            "-q",
            "-rA",
            "-o",
            "addopts=",
            "tests/adversarial/test_exploits_gpu.py",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    with open(os.path.join(out, "pytest_gpu.log"), "w") as fh:
        fh.write(p.stdout + p.stderr)
    print(p.stdout[-4000:], flush=True)
    print(f"pytest gpu: rc={p.returncode} in {time.time() - t0:.0f}s", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--stage", choices=["a", "b", "c"], required=True)
    ap.add_argument("--out", default=os.environ.get("OUT", "/tmp/out"))
    ap.add_argument("--problems", default="level*/*.py")
    ap.add_argument("--tag", default="gpu")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    if args.stage == "a":
        stage_a(args.out)
    elif args.stage == "b":
        stage_b(args.out, args.problems, args.tag)
    else:
        stage_c(args.out)


if __name__ == "__main__":
    main()
