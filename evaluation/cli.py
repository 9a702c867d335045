"""Command line: python -m evaluation {evaluate,check-problem,probe,sweep} ..."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any, NoReturn

from evaluation.builds.stage import default_build_workers
from evaluation.phases.problem_check import check_problem
from evaluation.results.hardware import probe_hardware
from evaluation.results.kernelbench_format import to_kernelbench
from evaluation.results.types import INSTRUMENTS, KNOWN_INSTRUMENTS, EvaluationConfig
from evaluation.runner import evaluate
from evaluation.sandbox.host_errors import INFRASTRUCTURE_ERROR
from evaluation.sweep import find_tasks, format_summary, run_sweep, visible_gpus


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, exit status 2
        sys.stderr.write(f"usage error: {message}\n")
        raise SystemExit(2)


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="python -m evaluation", description="Evaluate KernelBench kernels in isolation.")
    sub = p.add_subparsers(dest="command", parser_class=_Parser)
    e = sub.add_parser("evaluate", help="evaluate one kernel against its problem")
    e.add_argument("--problem", required=True)
    e.add_argument("--kernel", required=True)
    _common(e)
    e.add_argument("--correctness-trials", type=int, default=None)
    e.add_argument("--timing-trials", type=int, default=None)
    e.add_argument("--speedup-flag-threshold", type=float, default=None)
    e.add_argument("--precision", choices=["fp32", "fp16", "bf16"], default=None,
                   help="KernelBench's precision: cast the models and inputs (tolerance 1e-4 for fp32, 1e-2 otherwise)")
    e.add_argument("--json-format", choices=["native", "kernelbench"], default=None,
                   help="print JSON: this library's fields (native) or KernelBench's KernelExecResult fields")
    c = sub.add_parser("check-problem", help="sanity-check a problem file")
    c.add_argument("problem")
    _common(c)
    pr = sub.add_parser("probe", help="describe this host's hardware (found in a child process)")
    pr.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    pr.add_argument("--json", action="store_true")
    _sweep_parser(sub)
    return p


def _sweep_parser(sub: Any) -> None:
    s = sub.add_parser("sweep", help="evaluate every problem of a KernelBench checkout (against itself or kernels)")
    s.add_argument("kernelbench_dir")
    s.add_argument("--levels", type=int, nargs="+", default=[1, 2, 3])
    s.add_argument("--gpus", default="all", help="'all' or how many of the visible GPUs (one evaluation per GPU)")
    s.add_argument("--workers", type=int, default=1, help="parallel evaluations with --device cpu")
    s.add_argument("--kernels", default=None, help="folder of kernels (levelL/NAME.py or "
                                                   "level_L_problem_P_sample_0_kernel.py) instead of self-checks")
    s.add_argument("--problems", nargs="+", default=["*"], help="globs on problem names, e.g. '19_*' 'level3/*ResNet*'")
    s.add_argument("--out", default=None, help="JSONL file, one line per evaluation")
    s.add_argument("--no-pin", action="store_true", help="do not pin the sandboxed processes to CPU cores")
    s.add_argument("--build-workers", type=int, default=None,
                   help="build processes compiling kernels ahead of the GPUs (default: $KB_BUILD_WORKERS, else "
                        "as many as the build cores and memory hold at what builds use; 0: each evaluation "
                        "builds its own)")
    s.add_argument("--cuda-arch", default=None, help="architecture CUDA kernels are built for, e.g. 9.0 "
                                                       "(default: $TORCH_CUDA_ARCH_LIST, else the GPU's)")
    _common(s)
    s.add_argument("--correctness-trials", type=int, default=None)
    s.add_argument("--timing-trials", type=int, default=None)


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--timeout", type=float, default=None)
    p.add_argument("--memory-limit-mb", type=int, default=None)
    p.add_argument("--atol", type=float, default=None)
    p.add_argument("--rtol", type=float, default=None)
    p.add_argument("--size-scale", type=int, default=None)
    p.add_argument("--json", action="store_true")
    p.add_argument("--instruments", default=None, metavar="NAMES",
                   help="the reviewer's instruments to run after the timed rounds, comma-separated, or 'none' "
                        f"(default: {','.join(sorted(INSTRUMENTS))}); a self-check measures only the timing")


def _instruments(value: str) -> frozenset[str]:
    names = frozenset() if value.strip() == "none" else frozenset(n.strip() for n in value.split(",") if n.strip())
    unknown = sorted(names - KNOWN_INSTRUMENTS)
    if unknown:
        raise ValueError(f"unknown instrument(s) {', '.join(unknown)}; known: {', '.join(sorted(KNOWN_INSTRUMENTS))}")
    return names


def _read(path: str, what: str) -> str:
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read()
    except OSError as exc:
        sys.stderr.write(f"usage error: cannot read {what} file {path!r}: {exc.strerror}\n")
        raise SystemExit(2) from exc


def _config(args: argparse.Namespace) -> EvaluationConfig:
    kw: dict[str, Any] = {"device": args.device, "seed": args.seed, "atol": args.atol, "rtol": args.rtol}
    if getattr(args, "precision", None):
        kw["precision"] = args.precision
    if getattr(args, "cuda_arch", None):
        kw["cuda_arch"] = args.cuda_arch
    for attr, key in (("timeout", "timeout_s"), ("memory_limit_mb", "memory_limit_mb"),
                      ("size_scale", "size_scale"), ("correctness_trials", "correctness_trials"),
                      ("timing_trials", "timing_trials"), ("speedup_flag_threshold", "speedup_flag_threshold")):
        v = getattr(args, attr, None)
        if v is not None:
            kw[key] = v
    try:
        if getattr(args, "instruments", None) is not None:
            kw["instruments"] = _instruments(args.instruments)
        return EvaluationConfig(**kw)
    except ValueError as exc:
        sys.stderr.write(f"usage error: {exc}\n")
        raise SystemExit(2) from exc


def _summary(d: dict[str, Any]) -> str:
    lines = [f"status: {d['status']}  (compiled={d['compiled']}, correct={d['correct']}, "
             f"trials {d['trials_passed']}/{d['trials_total']}, backend {d['backend']})"]
    if d.get("error"):
        lines.append(f"error: {d['error']}")
    if d.get("speedup") is not None:
        lo, hi = d["speedup_interval"]
        lines.append(f"speedup: {d['speedup']:.3f}x  (95% CI {lo:.3f}-{hi:.3f})")
        lines.append(f"kernel:    median {d['kernel_ms']['median']:.4f} ms  std {d['kernel_ms']['std']:.4f}")
        lines.append(f"reference: median {d['reference_ms']['median']:.4f} ms  std {d['reference_ms']['std']:.4f}")
    if d.get("max_abs_diff") is not None:
        lines.append(f"max abs diff {d['max_abs_diff']:.3g}, max rel diff {d['max_rel_diff']:.3g}")
    for f in d["flags"]:
        lines.append(f"FLAG {f['code']}: {f['message']}")
    for n in d["notes"]:
        lines.append(f"note {n['code']}: {n['message']}")
    lines.append("timings: " + ", ".join(f"{k} {v:.2f}s" for k, v in d["timings_s"].items()))
    env = d.get("environment", {})
    lines.append(f"environment: {env.get('device_name')} torch {env.get('torch')} python {env.get('python')} "
                 f"isolation {env.get('isolation_mode')} network_isolated={env.get('network_isolated')}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command is None:
        sys.stderr.write("usage error: a command is required: evaluate, check-problem, probe or sweep\n")
        return 2
    if args.command == "sweep":
        return _sweep(args)
    if args.command == "probe":
        info = probe_hardware(args.device)
        print(json.dumps(info) if args.json else "\n".join(f"{k}: {v}" for k, v in info.items()))
        return 0
    if args.command == "check-problem":
        src = _read(args.problem, "problem")
        report = check_problem(src, _config(args))
        print(json.dumps(report, default=str) if args.json else json.dumps(report, indent=2, default=str))
        return 0
    problem = _read(args.problem, "problem")
    kernel = _read(args.kernel, "kernel")
    result = evaluate(problem, kernel, _config(args))
    d = result.to_dict()
    if args.json_format == "kernelbench":
        print(json.dumps(to_kernelbench(d), default=str))
    else:
        print(json.dumps(d, default=str) if (args.json or args.json_format) else _summary(d))
    if result.status == INFRASTRUCTURE_ERROR:  # no verdict: the host failed (evaluation.sandbox.host_errors)
        sys.stderr.write(f"infrastructure error, no verdict: {result.error}\n")
        return 3
    return 0


def _sweep(args: argparse.Namespace) -> int:
    tasks = find_tasks(args.kernelbench_dir, args.levels, args.kernels, args.problems)
    if not tasks:
        sys.stderr.write(f"usage error: no problems found under {args.kernelbench_dir!r} for levels {args.levels}\n")
        return 2
    cfg = _config(args)
    gpus = visible_gpus(args.gpus) if cfg.device == "cuda" else ["cpu"] * max(1, args.workers)
    if not gpus:
        sys.stderr.write("usage error: --device cuda but no GPU is visible\n")
        return 2
    sys.stderr.write(f"sweep: {len(tasks)} evaluations on {len(gpus)} {'GPU(s)' if cfg.device == 'cuda' else 'worker(s)'}\n")
    out = open(args.out, "w", encoding="utf-8") if args.out else None
    try:
        build_workers = args.build_workers
        if build_workers is None and os.environ.get("KB_BUILD_WORKERS"):
            build_workers = default_build_workers()  # the documented default; unset: sized by what builds use
        summary = run_sweep(tasks, cfg, gpus, out, pin=not args.no_pin, build_workers=build_workers)
    finally:
        if out is not None:
            out.close()
    print(format_summary(summary))
    if args.json:
        print(json.dumps(summary))
    return 0
