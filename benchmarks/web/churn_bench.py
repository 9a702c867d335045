"""Boards while results land (issue 22): time the board pages at rest, then while writers store
finished evaluations at 1, 5 and 50 per second through the GPU worker's own path
(`python -m benchmarks.web.bench writer`, spread over processes as GPU hosts would be), and print
one table side by side: the times of the answers that were 200, and apart, per page and phase,
how many were not (a 503 "being built" is a failure, never a page time). Standard library only;
the writers and the freshness probe are subprocesses of that benchmark entry point.

With --rescorer-log (the output of `manage.py refresh_boards -v 2`, the background re-scorer the
site runs), each phase with writes also reports the write path's database time per stored result:
its own (the worker's claim and store) plus its share of the re-scorer's pass that took its run
(the pass's database time over the results it covered), at p50 and p95; and with --rescorer-pid,
the share of a core the re-scorer used. Each phase with writes also reports the runs marked and
waiting for the re-scorer, sampled each second while writing, and how long it took to re-score
them all once the writers stopped (at most --drain-seconds).

    python benchmarks/web/churn_bench.py --base http://127.0.0.1:8800 [--py .venv/bin/python] \
        [--repeat 20] [--rates 1 5 50] [--concurrent-seconds 10] [--rescorer-log FILE --rescorer-pid PID]
"""

from __future__ import annotations

import argparse
import bisect
import json
import math
import os
import re
import statistics
import subprocess
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field

from http_bench import BOARD_PAGES, fetch, percentile

BOARDS = (*BOARD_PAGES, "/api/v1/leaderboard/?level=1")
CONCURRENT_URL = "/levels/1/"
MAX_WRITERS = 10  # writer processes at most: 50 writes/s are 10 GPU hosts storing 5 a second each
PASS_LINE = re.compile(r"pass at ([\d.]+): (\d+) runs in ([\d.]+) ms, database ([\d.]+) ms")


@dataclass
class Answers:
    """The answers to some requests: the times (ms) of those answered 200, and the count of every
    other status apart. A 503 "being built" is a failure, not a page time: timing it as one made
    the at-rest column mostly a timing of board builds."""

    times: list[float] = field(default_factory=list)
    failed: Counter = field(default_factory=Counter)  # {status: count}, 200 left out

    def add(self, status: int, seconds: float) -> None:
        if status == 200:
            self.times.append(seconds * 1000)
        else:
            self.failed[status] += 1

    def cell(self) -> str:
        """'p50 / p95' of the 200 answers ('–' when none was)."""
        if not self.times:
            return "–"
        return f"{statistics.median(self.times):.0f} / {percentile(self.times, 0.95):.0f}"

    def failures(self) -> str:
        """'2 x 503, 1 x 500' ('0' when every answer was a 200)."""
        return ", ".join(f"{n} x {status}" for status, n in sorted(self.failed.items())) or "0"


def time_pages(base: str, repeat: int) -> dict[str, Answers]:
    """{url: its answers} to `repeat` sequential requests after two warm-ups (not counted)."""
    figures = {}
    for url in BOARDS:
        fetch(base, url, "")
        fetch(base, url, "")
        figures[url] = Answers()
        for _ in range(repeat):
            status, _, seconds = fetch(base, url, "")
            figures[url].add(status, seconds)
    return figures


def clients(base: str, url: str, n: int, seconds: float) -> tuple[float, Answers]:
    """(200 answers per second, every answer) of `n` concurrent clients on `url`."""
    answers = Answers()
    stop = time.monotonic() + seconds

    def client() -> None:
        while time.monotonic() < stop:
            status, _, took = fetch(base, url, "")
            answers.add(status, took)  # list.append and Counter's += under the GIL: one thread each

    threads = [threading.Thread(target=client) for _ in range(n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return len(answers.times) / seconds, answers


def first_after_a_write(base: str, manage: list[str]) -> dict[str, str]:
    """{url: ms, or the status when not 200} of the first request after one stored evaluation."""
    figures = {}
    for url in BOARDS:
        fetch(base, url, "")
        fetch(base, url, "")
        subprocess.run([*manage, "writer", "--count", "1", "--rate", "0"], check=True, capture_output=True)
        status, _, seconds = fetch(base, url, "")
        figures[url] = f"{seconds * 1000:.0f}" if status == 200 else f"{status} (failed)"
    return figures


class Writer:
    """`python -m benchmarks.web.bench writer` in the background for the length of a `with` block: one process
    per write a second, at most MAX_WRITERS (GPU workers are separate processes), together at
    `rate`. `stored`: (epoch seconds, database ms) of every result they stored."""

    def __init__(self, manage: list[str], rate: float, nice: int = 0) -> None:
        self.processes_n = max(1, min(math.ceil(rate), MAX_WRITERS))
        manage = ["nice", "-n", str(nice), *manage] if nice else manage
        each = rate / self.processes_n
        self.stop_file = os.path.join(tempfile.mkdtemp(prefix="kb-writer-"), "stop")
        self.commands = [
            [*manage, "writer", "--rate", f"{each:g}", "--seed", str(int(rate * 10) + n), "--stop-file", self.stop_file]
            for n in range(self.processes_n)
        ]
        self.summary = ""
        self.stored: list[tuple[float, float]] = []

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
                output = (process.communicate(timeout=120)[0] or "").strip().splitlines()
            except subprocess.TimeoutExpired:
                process.kill()
                output = ["(a writer did not stop within 120 s: killed)"]
            self.stored += [tuple(s) for line in output if line.startswith("stored ") for s in json.loads(line[7:])]
            lines.append("\n".join(line for line in output if not line.startswith("stored ")))
        achieved = sum(float(rate) for line in lines for rate in re.findall(r"\(([\d.]+)/s\)", line))
        self.summary = f"{self.processes_n} writer process(es), together {achieved:.2f} evaluations/s:\n" + "\n".join(
            f"  {line}" for line in lines
        )


def phase(base: str, args, manage: list[str], rate: float) -> dict:
    """One phase's figures: pages, concurrent clients, and (while writing) the freshness probe and
    the write path's database time."""
    if rate == 0:
        pages = time_pages(base, args.repeat)
        return {"pages": pages, "clients": clients(base, CONCURRENT_URL, args.concurrent, args.concurrent_seconds)}
    cpu_before, started = cpu_seconds(args.rescorer_pid), time.time()
    with Writer(manage, rate, args.writer_nice) as writer:
        # The marks waiting for the re-scorer, sampled while the writers write, then drained.
        backlog = subprocess.Popen(
            [*manage, "marks", "--stop-file", writer.stop_file, "--seconds", str(args.drain_seconds)],
            stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        pages = time_pages(base, args.repeat)
        concurrent = clients(base, CONCURRENT_URL, args.concurrent, args.concurrent_seconds)
        probe = subprocess.run(
            [*manage, "visible", "--base", base, "--trials", str(args.trials)], capture_output=True, text=True
        )
    marks = backlog.communicate()[0].strip()  # once the re-scorer re-scored the last results, or gave up
    time.sleep(2)  # its last pass logged
    cpu = (cpu_seconds(args.rescorer_pid) - cpu_before) / (time.time() - started)
    path = write_path(writer.stored, rescorer_passes(args.rescorer_log, started), cpu) if args.rescorer_log else ""
    return {
        "pages": pages, "clients": concurrent, "writer": writer.summary, "visible": _probe_output(probe),
        "write_path": path, "marks": marks,
    }  # fmt: skip


def _probe_output(probe: subprocess.CompletedProcess) -> str:
    """What the freshness probe printed, and why it stopped when it failed (at 13 M it printed
    nothing at 1 and 5 writes/s, twice, and its error was not kept)."""
    said = probe.stdout.strip()
    if probe.returncode:
        error = probe.stderr.strip().splitlines()[-3:]
        said += f"\n(the probe failed, exit {probe.returncode}: " + " / ".join(error) + ")"
    return said.strip()


def rescorer_passes(log: str, since: float) -> list[tuple[float, int, float]]:
    """(start, runs, database ms) of each pass the re-scorer logged from `since` on."""
    with open(log) as lines:
        found = [PASS_LINE.search(line) for line in lines]
    passes = [(float(m[1]), int(m[2]), float(m[4])) for m in found if m]
    return sorted(p for p in passes if p[0] >= since)


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process so far (Linux /proc); 0 without a pid."""
    if not pid:
        return 0.0
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def write_path(stored: list[tuple[float, float]], passes: list[tuple[float, int, float]], cpu: float) -> str:
    """Database ms per stored result: its own, plus its share of the first pass that started after
    it was stored (that pass's database ms over the results it covered); p50 / p95 of each."""
    starts = [start for start, _, _ in passes]
    covered: dict[int, list[float]] = {}
    for at, ms in stored:
        index = bisect.bisect_left(starts, at)
        if index < len(passes):
            covered.setdefault(index, []).append(ms)
    own = [ms for results in covered.values() for ms in results]
    share = [passes[i][2] / len(results) for i, results in covered.items() for _ in results]
    total = [ms + passes[i][2] / len(results) for i, results in covered.items() for ms in results]
    if not total:
        return "write path: no stored result was covered by a logged re-scorer pass"
    runs = sorted(n for _, n, _ in passes)

    def cell(values: list[float]) -> str:
        return f"p50 {statistics.median(values):.1f} / p95 {percentile(values, 0.95):.1f} ms"

    return (
        f"write path, database time per stored result ({len(total)} of {len(stored)} results): "
        f"store {cell(own)}; share of re-scoring {cell(share)}; together {cell(total)}\n"
        f"  re-scorer: {len(passes)} passes, median {runs[len(runs) // 2]} runs a pass, "
        f"database {sum(p[2] for p in passes) / 1000:.1f} s in all; its process used {cpu:.0%} of a core"
    )


def report(results: dict[float, dict], first: dict[str, str], args) -> None:
    names = ["at rest" if rate == 0 else f"{rate:g} write{'s' if rate != 1 else ''}/s" for rate in results]
    print("| page | " + " | ".join(f"{name} p50 / p95 ms" for name in names) + " | first request after one write ms |")
    print("| --- |" + " --- |" * (len(names) + 1))
    for url in BOARDS:
        cells = [r["pages"][url].cell() for r in results.values()]
        print(f"| `{url}` | " + " | ".join(cells) + f" | {first[url]} |")
    print(f"\nNot answered 200, of {args.repeat} timed requests a page (left out of the times above):")
    print("| page | " + " | ".join(names) + " |")
    print("| --- |" + " --- |" * len(names))
    for url in BOARDS:
        print(f"| `{url}` | " + " | ".join(r["pages"][url].failures() for r in results.values()) + " |")
    print()
    for name, r in zip(names, results.values(), strict=True):
        rps, answers = r["clients"]
        p95 = f"{percentile(answers.times, 0.95):.0f}" if answers.times else "–"
        print(
            f"{args.concurrent} clients on {CONCURRENT_URL}, {name}: {rps:.1f} requests/s answered 200 "
            f"(p95 {p95} ms); not 200: {answers.failures()}"
        )
    for name, r in zip(names, results.values(), strict=True):
        if "writer" in r:
            print(f"{name}: {r['writer']}")
            if r["write_path"]:
                print(r["write_path"])
            print("\n".join(f"  {line}" for line in r["visible"].splitlines()))
            print("\n".join(f"  {line}" for line in r["marks"].splitlines()))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--base", required=True)
    parser.add_argument("--py", default=".venv/bin/python")
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--rates", type=float, nargs="*", default=[1.0, 5.0, 50.0])
    parser.add_argument("--concurrent", type=int, default=8)
    parser.add_argument("--concurrent-seconds", type=float, default=10.0)
    parser.add_argument("--trials", type=int, default=3, help="results watched until they show, per write rate")
    parser.add_argument("--drain-seconds", type=float, default=120.0, help="wait for the marks after a phase")
    parser.add_argument("--rescorer-log", default="", help="the output of `manage.py refresh_boards -v 2`")
    parser.add_argument("--rescorer-pid", type=int, default=0, help="its process id: the CPU it used")
    parser.add_argument(
        "--writer-nice", type=int, default=0,
        help="run the writers' Python at this niceness (their database backends are not niced): on a "
        "machine of few cores they stand for GPU hosts, whose work is not the site's",
    )  # fmt: skip
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
