"""CPU time by kind of process while a benchmark runs: samples /proc every second until stopped
(SIGINT/SIGTERM) or for --seconds, then prints CPU-seconds per label (the process's command,
shortened: gunicorn, postgres backend, the re-scorer, a writer, pytest, cc1plus...) and the share
of the machine's cores they used. Linux only.

    python benchmarks/cpu_by_process.py --seconds 60 > cpu.txt &
"""

from __future__ import annotations

import argparse
import os
import signal
import time
from collections import defaultdict

TICKS = os.sysconf("SC_CLK_TCK")
LABELS = (  # (text in the command line, label): the first that matches
    ("refresh_boards", "re-scorer (refresh_boards)"),
    ("churn_bench", "benchmark driver"),
    ("bench writer", "writers (benchmarks.web.bench writer)"),
    ("gunicorn", "gunicorn"),
    ("postgres:", "postgres"),
    ("redis-server", "redis"),
    ("pytest", "pytest"),
    ("evaluation.child.harness", "sandbox (evaluation.child.harness)"),
    ("cc1plus", "cc1plus"),
    ("chromium", "chromium"),
    ("http_bench", "http clients"),
)


def label(pid: str) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            cmd = fh.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return "?"
    for text, name in LABELS:
        if text in cmd:
            return name
    return (cmd.split(" ")[0].rsplit("/", 1)[-1] or "?")[:40]


def cpu_ticks() -> dict[str, tuple[str, int]]:
    """pid -> (label, user+system ticks so far)."""
    found = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        found[pid] = (label(pid), int(fields[11]) + int(fields[12]))
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=0, help="0: until stopped")
    parser.add_argument("--interval", type=float, default=1.0)
    args = parser.parse_args()
    stop = []
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.append(1))
    started = time.monotonic()
    seen = cpu_ticks()
    totals: dict[str, int] = defaultdict(int)
    while not stop and (not args.seconds or time.monotonic() - started < args.seconds):
        time.sleep(args.interval)
        now = cpu_ticks()
        for pid, (name, ticks) in now.items():
            totals[name] += ticks - seen.get(pid, (name, 0))[1] if pid in seen else ticks
        seen = now
    elapsed = time.monotonic() - started
    cores = os.cpu_count() or 1
    print(
        f"CPU by process over {elapsed:.0f} s on {cores} cores (a process started and ended between samples is missed)"
    )
    for name, ticks in sorted(totals.items(), key=lambda item: -item[1]):
        seconds = ticks / TICKS
        if seconds >= 0.1:
            print(f"  {seconds:8.1f} s  {seconds / elapsed / cores:6.1%} of the machine  {name}")
    print(
        f"  {sum(totals.values()) / TICKS:8.1f} s  in all; idle {1 - sum(totals.values()) / TICKS / elapsed / cores:.1%}"
    )


if __name__ == "__main__":
    main()
