"""Boards while results land (issue 22): time the board pages at rest, then while a writer stores
finished evaluations at 1 and at 5 per second through the GPU worker's own path
(`python -m benchmarks.web.bench writer`), and print one table side by side. Standard library only;
the writer and the freshness probe are subprocesses of that benchmark entry point.

    python benchmarks/web/churn_bench.py --base http://127.0.0.1:8800 [--py .venv/bin/python] \
        [--repeat 20] [--rates 1 5] [--concurrent-seconds 10]
"""

from __future__ import annotations

import argparse
import math
import os
import re
import statistics
import subprocess
import tempfile
import threading
import time

from http_bench import BOARD_PAGES, fetch, percentile

BOARDS = (*BOARD_PAGES, "/api/v1/leaderboard/?level=1")
CONCURRENT_URL = "/levels/1/"


def time_pages(base: str, repeat: int) -> dict[str, tuple[float, float]]:
    """{url: (p50 ms, p95 ms)} over `repeat` sequential requests after two warm-ups."""
    figures = {}
    for url in BOARDS:
        fetch(base, url, "")
        fetch(base, url, "")
        times = [fetch(base, url, "")[2] * 1000 for _ in range(repeat)]
        figures[url] = (statistics.median(times), percentile(times, 0.95))
    return figures


def clients(base: str, url: str, n: int, seconds: float) -> tuple[float, float]:
    """(requests per second, p95 ms) of `n` concurrent clients on `url`."""
    times: list[float] = []
    stop = time.monotonic() + seconds

    def client() -> None:
        while time.monotonic() < stop:
            times.append(fetch(base, url, "")[2] * 1000)

    threads = [threading.Thread(target=client) for _ in range(n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return len(times) / seconds, percentile(times, 0.95)


def first_after_a_write(base: str, manage: list[str]) -> dict[str, float]:
    """{url: ms} of the first request after one stored evaluation (the writer at rest otherwise)."""
    figures = {}
    for url in BOARDS:
        fetch(base, url, "")
        fetch(base, url, "")
        subprocess.run([*manage, "writer", "--count", "1", "--rate", "0"], check=True, capture_output=True)
        figures[url] = fetch(base, url, "")[2] * 1000
    return figures


class Writer:
    """`manage.py bench_web writer` in the background for the length of a `with` block: one process
    per write a second (GPU workers are separate processes; one process on a loaded machine
    cannot store 5 a second), together at `rate`."""

    def __init__(self, manage: list[str], rate: float) -> None:
        self.processes_n = max(1, math.ceil(rate))
        each = rate / self.processes_n
        self.stop_file = os.path.join(tempfile.mkdtemp(prefix="kb-writer-"), "stop")
        self.commands = [
            [*manage, "writer", "--rate", f"{each:g}", "--seed", str(int(rate * 10) + n), "--stop-file", self.stop_file]
            for n in range(self.processes_n)
        ]
        self.summary = ""

    def __enter__(self) -> Writer:
        self.processes = [subprocess.Popen(command, stdout=subprocess.PIPE, text=True) for command in self.commands]
        for process in self.processes:  # the phase is timed once every writer is writing
            process.stdout.readline()
        return self

    def __exit__(self, *exc: object) -> None:
        open(self.stop_file, "w").close()  # each writer stops after its current write
        lines = []
        for process in self.processes:
            try:
                lines.append((process.communicate(timeout=120)[0] or "").strip())
            except subprocess.TimeoutExpired:
                process.kill()
                lines.append("(a writer did not stop within 120 s: killed)")
        achieved = sum(float(rate) for line in lines for rate in re.findall(r"\(([\d.]+)/s\)", line))
        self.summary = f"{self.processes_n} writer process(es), together {achieved:.2f} evaluations/s:\n" + "\n".join(
            f"  {line}" for line in lines
        )


def phase(base: str, args, manage: list[str], rate: float) -> dict:
    """One phase's figures: pages, concurrent clients, and (while writing) the freshness probe."""
    if rate == 0:
        pages = time_pages(base, args.repeat)
        return {"pages": pages, "clients": clients(base, CONCURRENT_URL, args.concurrent, args.concurrent_seconds)}
    with Writer(manage, rate) as writer:
        pages = time_pages(base, args.repeat)
        concurrent = clients(base, CONCURRENT_URL, args.concurrent, args.concurrent_seconds)
        probe = subprocess.run(
            [*manage, "visible", "--base", base, "--trials", str(args.trials)], capture_output=True, text=True
        )
    return {"pages": pages, "clients": concurrent, "writer": writer.summary, "visible": probe.stdout.strip()}


def report(results: dict[float, dict], first: dict[str, float], args) -> None:
    names = ["at rest" if rate == 0 else f"{rate:g} write{'s' if rate != 1 else ''}/s" for rate in results]
    print("| page | " + " | ".join(f"{name} p50 / p95 ms" for name in names) + " | first request after one write ms |")
    print("| --- |" + " --- |" * (len(names) + 1))
    for url in BOARDS:
        cells = [f"{r['pages'][url][0]:.0f} / {r['pages'][url][1]:.0f}" for r in results.values()]
        print(f"| `{url}` | " + " | ".join(cells) + f" | {first[url]:.0f} |")
    for name, r in zip(names, results.values(), strict=True):
        rps, p95 = r["clients"]
        print(f"{args.concurrent} clients on {CONCURRENT_URL}, {name}: {rps:.1f} requests/s (p95 {p95:.0f} ms)")
    for name, r in zip(names, results.values(), strict=True):
        if "writer" in r:
            print(f"{name}: {r['writer']}")
            print("\n".join(f"  {line}" for line in r["visible"].splitlines()))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--base", required=True)
    parser.add_argument("--py", default=".venv/bin/python")
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--rates", type=float, nargs="*", default=[1.0, 5.0])
    parser.add_argument("--concurrent", type=int, default=8)
    parser.add_argument("--concurrent-seconds", type=float, default=10.0)
    parser.add_argument("--trials", type=int, default=3, help="results watched until they show, per write rate")
    args = parser.parse_args()
    manage = [args.py, "-m", "benchmarks.web.bench"]
    results = {}
    for rate in [0.0, *args.rates]:
        started = time.monotonic()
        results[rate] = phase(args.base, args, manage, rate)
        print(f"(phase at {rate:g} writes/s done in {time.monotonic() - started:.0f} s)", flush=True)
    first = first_after_a_write(args.base, manage)
    report(results, first, args)


if __name__ == "__main__":
    main()
