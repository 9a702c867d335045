"""What one evaluation costs the host: CPU seconds and wall seconds of a small CPU evaluation (the
test suite's ``add_one`` problem against itself), and where its wall time goes.

    python benchmarks/evaluation_cpu_cost.py [--runs 5] [--profile]

Runs one evaluation first (its problem's kept facts are then found, as in a suite or a worker that
has seen the problem), then ``--runs`` more in a row, and reads the host's busy time from
``/proc/stat`` around them: every process's CPU counts (the sandbox's processes are not this
process's children while they run), so the machine must be otherwise quiet. With ``--profile``,
the last evaluation runs under cProfile and the calls that took the most wall time are printed
(the parent mostly waits: the wait is where its processes' work shows).

The figures docs/performance.md quotes in "The suite after one false flag" came from this
measurement (3.52 CPU-s and 2.03 s of wall an evaluation on the 2-core development machine).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from tests.evaluation.helpers import EVAL_PROBLEMS, read, run, self_kernel  # noqa: E402

PROBLEM = EVAL_PROBLEMS / "add_one.py"


def busy_seconds() -> float:
    """The host's CPU seconds spent outside idle and iowait since boot (``/proc/stat``'s first line)."""
    with open("/proc/stat") as fh:
        fields = [int(x) for x in fh.readline().split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def evaluate_once() -> str:
    return run(PROBLEM, self_kernel(read(PROBLEM))).status


def measure(runs: int) -> dict[str, float]:
    statuses = []
    cpu0, wall0 = busy_seconds(), time.monotonic()
    for _ in range(runs):
        statuses.append(evaluate_once())
    cpu, wall = busy_seconds() - cpu0, time.monotonic() - wall0
    if set(statuses) != {"correct"}:
        raise SystemExit(f"an evaluation did not end correct: {statuses}")
    return {"runs": runs, "cpu_s_each": round(cpu / runs, 2), "wall_s_each": round(wall / runs, 2)}


def profile_once(top: int = 15) -> str:
    prof = cProfile.Profile()
    prof.enable()
    evaluate_once()
    prof.disable()
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("cumulative").print_stats(top)
    return out.getvalue()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--profile", action="store_true", help="also profile one more evaluation")
    args = parser.parse_args(argv)
    print(f"host: {os.cpu_count()} cores, load {os.getloadavg()[0]:.2f} before", flush=True)
    print(f"first evaluation (finds the problem's facts): {evaluate_once()}", flush=True)
    figures = measure(args.runs)
    print(
        f"{figures['runs']} evaluations in a row: {figures['cpu_s_each']} CPU-s and {figures['wall_s_each']} s "
        "of wall each (the host's busy time: every process counts)"
    )
    if args.profile:
        print(profile_once())


if __name__ == "__main__":
    main()
