"""How many builds a host runs at once, and on which cores: sized by what builds use.

Each build's process tree is measured (CPU seconds, the reaped compilers included, and the peak of
its resident memory, sampled by the sandbox's watchdog); the pool admits as many builds at a time as
the build cores and the host's available memory hold at the recent builds' median use
(``PoolSizer``). The cores left to builds are the host's less the timing cores and every core that
shares a physical core with one (their SMT siblings, from
``/sys/devices/system/cpu/cpu<N>/topology/thread_siblings_list``): a build on a timing core's sibling
would take the core's execution units from the timed process.

Which cores time (``place``, one rule for ``python -m evaluation sweep`` and the site's GPU workers
and builder): the host's physical cores in order, cut into one equal slice per GPU; the worker of GPU
i times on the first logical CPU of slice i (so no two timing cores share a physical core, and they
spread over the host as the GPUs do over its sockets), and runs its other processes on the rest of
its slice; builds get every core but the timing cores and their siblings. With fewer than
``MIN_CPUS_PER_GPU`` logical CPUs per GPU nothing is pinned.
"""

from __future__ import annotations

import os
import statistics
import threading
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from evaluation.sandbox.limits import stat_fields

_CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
#: Before any build was measured: a load_inline build runs its two compiles side by side about half
#: the time (1.5 cores), and holds torch's Python process plus two compilers (2.5 GB).
PRIOR_CORES_PER_BUILD = 1.5
PRIOR_MEMORY_MB = 2500.0
#: The share of the host's available memory builds may take.
MEMORY_SHARE = 0.8
RECENT = 20
#: Logical CPUs per GPU below which no core is set apart for timing (too few to keep one free).
MIN_CPUS_PER_GPU = 4


@dataclass
class BuildUsage:
    """What one build's process tree used."""

    cpu_s: float
    peak_rss_mb: float
    wall_s: float = 0.0

    @property
    def cores(self) -> float:
        return self.cpu_s / self.wall_s if self.wall_s > 0 else 0.0


def parse_cpu_list(text: str) -> set[int]:
    """``"0-3,8,10-11"`` -> {0, 1, 2, 3, 8, 10, 11}."""
    out: set[int] = set()
    for part in text.strip().split(","):
        if not part:
            continue
        lo, _, hi = part.partition("-")
        out.update(range(int(lo), int(hi or lo) + 1))
    return out


def thread_siblings(cpu: int, sys_root: str = "/sys") -> set[int]:
    """The logical CPUs that share ``cpu``'s physical core (itself included)."""
    path = os.path.join(sys_root, f"devices/system/cpu/cpu{cpu}/topology/thread_siblings_list")
    try:
        with open(path, encoding="ascii") as fh:
            return parse_cpu_list(fh.read()) | {cpu}
    except (OSError, ValueError):
        return {cpu}


def build_cpus(available: Iterable[int], reserved: Iterable[int], sys_root: str = "/sys") -> list[int]:
    """The cores builds may use: ``available`` less the ``reserved`` (timing) cores and their siblings."""
    kept_off: set[int] = set()
    for cpu in reserved:
        kept_off |= thread_siblings(cpu, sys_root)
    return sorted(set(available) - kept_off)


def physical_cores(available: Iterable[int], sys_root: str = "/sys") -> list[list[int]]:
    """``available`` grouped by physical core (SMT siblings together), in order of their first CPU."""
    cpus = sorted(set(available))
    seen: set[int] = set()
    cores: list[list[int]] = []
    for cpu in cpus:
        if cpu not in seen:
            group = sorted(thread_siblings(cpu, sys_root) & set(cpus) | {cpu})
            seen.update(group)
            cores.append(group)
    return cores


@dataclass
class Placement:
    """How a host's cores are split: ``timing[i]`` is the core the worker of GPU i times on,
    ``slices[i]`` the cores its other processes run on (its slice less the timing cores' siblings),
    ``builds`` the cores builds run on. No timing cores: nothing pinned, builds anywhere."""

    timing: list[int]
    slices: list[list[int]]
    builds: list[int]


def place(available: Iterable[int], gpus: int, sys_root: str = "/sys",
          timing: Iterable[int] | None = None) -> Placement:
    """The split of ``available`` for ``gpus`` GPU workers; ``timing`` given (an operator's choice,
    one core per GPU in GPU order): those cores time, and builds keep off them the same way."""
    cpus = sorted(set(available))
    cores = physical_cores(cpus, sys_root)
    n = max(1, gpus)
    per = len(cores) // n
    slices = [[c for core in cores[i * per:(i + 1) * per] for c in core] for i in range(n)]
    if timing:
        chosen = [int(c) for c in timing]
    elif len(cpus) // n >= MIN_CPUS_PER_GPU and per >= 1:
        chosen = [s[0] for s in slices]
    else:
        return Placement([], [[] for _ in range(n)], cpus)
    return Placement(chosen, [build_cpus(s, chosen, sys_root) for s in slices],
                     build_cpus(cpus, chosen, sys_root) or cpus)


def available_memory_mb(meminfo: str = "/proc/meminfo") -> float:
    try:
        with open(meminfo, encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) / 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0.0


def tree_cpu_seconds(pids: Iterable[int]) -> float:
    """CPU time of live processes plus what each has reaped (user + system; ``cutime``/``cstime``)."""
    ticks = 0
    for pid in pids:
        fields = stat_fields(pid)
        try:
            ticks += sum(int(f) for f in fields[11:15]) if fields is not None else 0
        except ValueError:
            pass
    return ticks / _CLK_TCK


def measure_tree(proc: Any) -> BuildUsage:
    """What a sandboxed build process (``SandboxProcess``) used so far; call it after its build
    returned, while the process still lives (its compilers are reaped by then)."""
    return BuildUsage(cpu_s=tree_cpu_seconds(proc.tree()), peak_rss_mb=float(proc.peak_rss_mb))


def pool_size(cores: int, memory_mb: float, cores_per_build: float, memory_per_build_mb: float) -> int:
    """Builds at once: as many as the cores hold at ``cores_per_build`` and the memory at
    ``memory_per_build_mb`` (``memory_mb`` <= 0: unknown, not a bound); at least one."""
    by_cpu = int(round(cores / max(0.25, cores_per_build)))
    by_memory = int(memory_mb * MEMORY_SHARE // max(1.0, memory_per_build_mb)) if memory_mb > 0 else by_cpu
    return max(1, min(by_cpu, by_memory))


class PoolSizer:
    """Admits builds as long as fewer run than the measured use allows (``limit``); a fixed
    ``workers`` number admits exactly that many. ``share``: this pool is one of that many on the
    host's ``cores`` and memory (the site's per-GPU builders), and gets its part of each."""

    def __init__(self, cores: int, workers: int | None = None, memory_mb: float | None = None,
                 share: int = 1) -> None:
        share = max(1, share)
        self.cores = max(1, cores // share)
        self.fixed = workers
        self.memory_mb = (available_memory_mb() if memory_mb is None else memory_mb) / share
        self.recent: deque[BuildUsage] = deque(maxlen=RECENT)
        self.running = 0
        self._cond = threading.Condition()

    def record(self, usage: BuildUsage) -> None:
        if usage.wall_s <= 0 or usage.cpu_s <= 0:
            return
        with self._cond:
            self.recent.append(usage)
            self._cond.notify_all()

    def estimate(self) -> tuple[float, float]:
        """(cores per build, MB per build): the recent builds' medians, else the priors."""
        if not self.recent:
            return PRIOR_CORES_PER_BUILD, PRIOR_MEMORY_MB
        return (statistics.median(u.cores for u in self.recent),
                statistics.median(u.peak_rss_mb for u in self.recent) or PRIOR_MEMORY_MB)

    @property
    def limit(self) -> int:
        if self.fixed:
            return max(1, self.fixed)
        cores_per_build, mb = self.estimate()
        return pool_size(self.cores, self.memory_mb, cores_per_build, mb)

    def acquire(self) -> None:
        with self._cond:
            while self.running >= self.limit:
                self._cond.wait(timeout=1.0)
            self.running += 1

    def release(self) -> None:
        with self._cond:
            self.running -= 1
            self._cond.notify_all()

    def describe(self) -> dict[str, Any]:
        cores_per_build, mb = self.estimate()
        return {"cores": self.cores, "memory_mb": round(self.memory_mb), "fixed": self.fixed,
                "measured_builds": len(self.recent), "cores_per_build": round(cores_per_build, 2),
                "memory_per_build_mb": round(mb), "limit": self.limit}
