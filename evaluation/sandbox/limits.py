"""Resource limits of sandboxed process trees, and the host figures their defaults come from.

* ``workers_for(device)``: workers one ``evalworker`` runs well (one per GPU it may use; on the CPU
  one per ``CORES_PER_CPU_WORKER`` cores); ``host_worker_count()``: evaluations the whole host runs.
* ``default_memory_limit_mb()``: ``$EVAL_MEMORY_LIMIT_MB``, else an equal share of the host's
  memory per evaluation the host runs, halved because an evaluation's kernel and reference run at
  once.
* ``process_table()``: one pass over /proc: each process's children and thread count.
* ``MemoryMeter``: the proportional memory (PSS) of a process tree, so that pages forked children
  share count once, not once per child; cheap while the tree is far below its limit.

Nothing here imports torch or touches CUDA (the worker process calls it).
"""

from __future__ import annotations

import os
import stat
import subprocess
import threading
import time
from typing import Protocol

#: A CPU evaluation runs a reference and a kernel process (torch threads in each) and times them in
#: turns on quiet cores: beside a second one on 2 cores, each evaluation ran 50% longer (docs/workers.md).
CORES_PER_CPU_WORKER = 4

#: Share of the host's memory that evaluations may use together (the rest: the OS, the worker).
HOST_MEMORY_SHARE = 0.8

#: Tasks (processes and threads) a sandboxed process tree may have; RLIMIT_NPROC is set a little
#: above, so that a fork bomb stalls there until the watchdog ends it with "too many processes".
DEFAULT_MAX_PROCESSES = 512
NPROC_HEADROOM = 16


def _env_int(name: str) -> int | None:
    value = os.environ.get(name, "").strip()
    if not value:
        return None
    try:
        return int(value)
    except ValueError as exc:
        raise ValueError(f"{name} must be a whole number, not {value!r}") from exc


def host_memory_mb() -> int:
    """MemTotal, or the memory limit of this process's cgroup (v2 or v1) when that is lower."""
    total = 0
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemTotal:"):
                    total = int(line.split()[1]) // 1024
                    break
    except (OSError, ValueError):
        total = 16384
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            with open(path, encoding="ascii") as fh:
                text = fh.read().strip()
        except OSError:
            continue
        if text.isdigit() and 0 < int(text) // 2**20 < total:
            total = int(text) // 2**20
    return total


def host_gpu_count() -> int:
    """NVIDIA GPUs of this host (device nodes, else the driver's list; no CUDA initialisation)."""
    try:
        nodes = [d for d in os.listdir("/dev") if d.startswith("nvidia") and d[6:].isdigit()]
    except OSError:
        nodes = []
    if nodes:
        return len(nodes)
    try:
        return len(os.listdir("/proc/driver/nvidia/gpus"))
    except OSError:
        return 0


def visible_gpus() -> list[str]:
    """The GPUs this process may use: ``$CUDA_VISIBLE_DEVICES``'s entries when set, else all of the host's."""
    listed = os.environ.get("CUDA_VISIBLE_DEVICES")
    if listed is None:
        return [str(i) for i in range(host_gpu_count())]
    out = []
    for entry in (e.strip() for e in listed.split(",")):
        if not entry or entry == "-1":
            break  # CUDA stops at the first invalid entry
        out.append(entry)
    return out


def host_cpu_count() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def workers_for(device: str) -> int:
    """Workers one ``evalworker`` runs well: one per GPU it may use; on the CPU, one per
    ``CORES_PER_CPU_WORKER`` cores (at least one)."""
    if device == "cuda":
        return max(1, len(visible_gpus()))
    return max(1, host_cpu_count() // CORES_PER_CPU_WORKER)


def host_worker_count() -> int:
    """Evaluations the whole host runs at once: one per GPU of the host, else one per
    ``CORES_PER_CPU_WORKER`` cores, or ``$EVAL_WORKERS`` when that is more."""
    configured = _env_int("EVAL_WORKERS") or 0
    gpus = host_gpu_count()
    by_host = gpus if gpus else max(1, host_cpu_count() // CORES_PER_CPU_WORKER)
    return max(configured, by_host)


def default_memory_limit_mb() -> int:
    """``$EVAL_MEMORY_LIMIT_MB``, else 80% of the host's memory shared among the evaluations it runs at
    once (``host_worker_count``), halved (the kernel's tree and the reference's run at once)."""
    configured = _env_int("EVAL_MEMORY_LIMIT_MB")
    if configured is not None:
        return configured
    share = host_memory_mb() * HOST_MEMORY_SHARE / host_worker_count() / 2
    return max(1024, int(share))


def default_tmp_limit_mb(memory_limit_mb: int) -> int:
    """What a sandboxed process may keep in its temporary folders (/tmp, /var/tmp, /dev/shm: one
    tmpfs, memory that no process's memory counts): ``$EVAL_TMP_LIMIT_MB``, else a quarter of its
    memory limit, between 256 MB and 1024 MB (a compiler's temporary files are tens of MB)."""
    configured = _env_int("EVAL_TMP_LIMIT_MB")
    if configured is not None:
        return max(1, configured)
    return min(1024, max(256, memory_limit_mb // 4))


#: Files and folders the temporary folders may hold together (each is kernel memory too).
TMP_MAX_INODES = 65536


class FolderMeter:
    """What a process tree keeps in its work folder (its ``HOME`` and working directory, in /dev/shm
    when that is the work root: memory that no process's memory counts), in kB: the files below it,
    walked without following links (a folder mounted over, another file system, is not this one's),
    the files there its processes hold open after unlinking them (by descriptor), and the anonymous
    memory files they hold (``memfd_create``: memory in no folder, and in no process's resident set
    until it is mapped and touched), each inode once.

    At most ``max_entries`` entries and descriptors are looked at (``entries`` says how many were
    seen; beyond the cap the tree holds too many files). A walk costs a system call per entry: it is
    taken again no sooner than ``COST_FACTOR`` times its last cost, nor than ``MIN_INTERVAL_S``.
    """

    COST_FACTOR = 4.0
    MIN_INTERVAL_S = 0.2

    def __init__(self, folder: str, max_entries: int = TMP_MAX_INODES) -> None:
        self.folder = folder
        self.max_entries = max_entries
        self.kb = 0
        self.entries = 0
        self.next_measure_at = 0.0

    def measure(self, pids: list[int], fresh: bool = False) -> tuple[int, int]:
        """(kB kept, entries seen), measured again when due (``fresh``: now)."""
        started = time.monotonic()
        if started < self.next_measure_at and not fresh:
            return self.kb, self.entries
        try:
            device = os.lstat(self.folder).st_dev
        except OSError:
            return self.kb, self.entries
        seen: set[tuple[int, int]] = set()
        self.kb, self.entries = self._walk(device, seen)
        self.kb += self._unlinked_open(pids, device, seen)
        cost = time.monotonic() - started
        self.next_measure_at = time.monotonic() + max(self.MIN_INTERVAL_S, self.COST_FACTOR * cost)
        return self.kb, self.entries

    def _walk(self, device: int, seen: set[tuple[int, int]]) -> tuple[int, int]:
        kb, entries, todo = 0, 0, [self.folder]
        while todo and entries <= self.max_entries:
            try:
                with os.scandir(todo.pop()) as it:
                    for entry in it:
                        entries += 1
                        try:
                            st = entry.stat(follow_symlinks=False)
                        except OSError:
                            continue
                        if st.st_dev != device or (st.st_dev, st.st_ino) in seen:
                            continue
                        seen.add((st.st_dev, st.st_ino))
                        kb += st.st_blocks // 2
                        if stat.S_ISDIR(st.st_mode):
                            todo.append(entry.path)
            except OSError:
                continue
        return kb, entries

    def _unlinked_open(self, pids: list[int], device: int, seen: set[tuple[int, int]]) -> int:
        kb = 0
        for pid in pids:
            try:
                fds = os.listdir(f"/proc/{pid}/fd")
            except OSError:
                continue
            for fd in fds:
                self.entries += 1
                if self.entries > self.max_entries:
                    return kb
                try:
                    st = os.stat(f"/proc/{pid}/fd/{fd}")
                except OSError:
                    continue
                key = (st.st_dev, st.st_ino)
                if st.st_nlink == 0 and stat.S_ISREG(st.st_mode) and key not in seen and (
                        st.st_dev == device or _is_memfd(f"/proc/{pid}/fd/{fd}")):
                    seen.add(key)
                    kb += st.st_blocks // 2
        return kb


def _is_memfd(fd_path: str) -> bool:
    try:
        return os.readlink(fd_path).startswith("/memfd:")
    except OSError:
        return False


def stat_fields(pid: int) -> list[bytes] | None:
    """The fields of /proc/<pid>/stat after the command's name (state first), None if it cannot be read."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None


def process_table() -> tuple[dict[int, list[int]], dict[int, int]]:
    """Every process's children, and its number of threads, read from /proc/<pid>/stat."""
    children: dict[int, list[int]] = {}
    threads: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        fields = stat_fields(int(entry))
        if fields is None:
            continue
        try:
            ppid, n_threads = int(fields[1]), int(fields[17])
        except (IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry))
        threads[int(entry)] = n_threads
    return children, threads


def rss_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/statm", "rb") as fh:
            return int(fh.read().split()[1]) * (os.sysconf("SC_PAGE_SIZE") // 1024)
    except (OSError, ValueError, IndexError):
        return 0


def pss_kb(pid: int) -> int:
    """Proportional set size; the resident size where smaps_rollup cannot be read (counts more,
    never less)."""
    try:
        with open(f"/proc/{pid}/smaps_rollup", "rb") as fh:
            for line in fh:
                if line.startswith(b"Pss:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return rss_kb(pid)


class MemoryMeter:
    """Decides whether a process tree is over its memory limit, counting proportional memory.

    The sum of resident sizes is cheap (statm) and never below the proportional sum, so while it is
    under the limit nothing more is read. Above it, the proportional sum (smaps_rollup, a page-table
    walk per process: 1-20 ms for a process holding torch, more on a loaded host) is measured, and
    measured again only once the resident sum has grown, since that measurement, by more than the
    room left under the limit, and not sooner than ``COST_FACTOR`` times the last measurement's
    cost: a tree of hundreds of forked torch processes must not keep the watchdog busy (its task
    count is checked between measurements), at the price of a later verdict on such a tree.
    """

    COST_FACTOR = 4.0

    def __init__(self, limit_mb: int) -> None:
        self.limit_kb = limit_mb * 1024
        self.pss_kb: int | None = None  # the last proportional measurement
        self.rss_floor_kb = 0  # the lowest resident sum seen since it
        self.next_measure_at = 0.0
        self.measurements = 0

    def over_limit(self, pids: list[int], extra_kb: int = 0, fresh: bool = False) -> tuple[bool, float, float]:
        """(over the limit?, resident sum in MB, proportional sum in MB or -1 when not measured);
        ``extra_kb``: memory held for the tree outside its processes, added to both sums; ``fresh``:
        the proportional sum measured now where the resident sum is over, whenever it last was."""
        rss = sum(rss_kb(p) for p in pids) + extra_kb
        if rss <= self.limit_kb:
            self.pss_kb = None
            return False, rss / 1024, -1.0
        if self.pss_kb is not None:
            self.rss_floor_kb = min(self.rss_floor_kb, rss)
            waiting = time.monotonic() < self.next_measure_at and not fresh
            if self.pss_kb + (rss - self.rss_floor_kb) <= self.limit_kb or waiting:
                return False, rss / 1024, -1.0
        started = time.monotonic()
        self.pss_kb = sum(pss_kb(p) for p in pids) + extra_kb
        self.next_measure_at = time.monotonic() + self.COST_FACTOR * (time.monotonic() - started)
        self.rss_floor_kb = rss
        self.measurements += 1
        return self.pss_kb > self.limit_kb, rss / 1024, self.pss_kb / 1024


class Watched(Protocol):
    """What the watchdog watches of a sandboxed process (evaluation.sandbox.process.SandboxProcess)."""

    proc: subprocess.Popen[bytes] | None
    killed_reason: str | None

    def limit_exceeded(self, children: dict[int, list[int]], threads: dict[int, int],
                       fresh: bool = False) -> str | None: ...

    def kill(self, reason: str | None = None) -> None: ...


class Watchdog(threading.Thread):
    """Polls each sandbox's whole process tree (one pass over /proc for all of them) and kills a tree
    over its task or memory limit."""

    def __init__(self, interval: float = 0.1) -> None:
        super().__init__(daemon=True, name="kb-eval-watchdog")
        self.interval = interval
        self.procs: list[Watched] = []
        self._stop_event = threading.Event()

    def add(self, p: Watched) -> None:
        self.procs.append(p)

    def run(self) -> None:
        while not self._stop_event.wait(self.interval):
            live = [p for p in self.procs if p.proc is not None and p.proc.poll() is None and not p.killed_reason]
            if not live:
                continue
            children, threads = process_table()
            for p in live:
                reason = p.limit_exceeded(children, threads)
                if reason:
                    p.kill(reason)

    def stop(self) -> None:
        self._stop_event.set()
