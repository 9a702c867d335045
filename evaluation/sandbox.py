"""Sandboxed child processes: namespaces, unprivileged uids, rlimits, scrubbed environment,
memory watchdog, and a line-based JSON channel on dedicated pipes.

Isolation modes (detected once per process, strongest first):

* ``root``: the caller is root and util-linux ``unshare`` works. Each child runs as PID 1 of new
  PID, network, mount and IPC namespaces (``--kill-child``: when it dies, everything it started
  dies with it, also processes that called setsid), with /proc remounted, the home directories
  and configured paths hidden behind tmpfs, and as its own unprivileged uid/gid (reference and
  kernel get different ones, chosen at random per evaluation), with no_new_privs.
* ``userns``: not root, but unprivileged user namespaces work: same namespaces, no uid switch.
* ``none``: plain child processes in their own session; stragglers are killed by process tree
  walk, but a double-forked process that escaped the tree can survive. Reported in
  ``environment``.
"""

from __future__ import annotations

import functools
import importlib.util
import io
import json
import os
import platform
import re
import secrets
import select
import shutil
import signal
import socket
import stat
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
from collections.abc import Callable
from typing import Any

from .limits import (
    DEFAULT_MAX_PROCESSES,
    NPROC_HEADROOM,
    TMP_MAX_INODES,
    FolderMeter,
    MemoryMeter,
    Watchdog,
    default_tmp_limit_mb,
    process_table,
)
from .safe_files import UnsafeFile, read_capped, remove_tree, take_over

PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))

PASS_THROUGH_ENV = (
    "CUDA_HOME", "CUDA_PATH", "CUDA_VISIBLE_DEVICES", "LD_LIBRARY_PATH", "TORCH_CUDA_ARCH_LIST", "MAX_JOBS",
    "OMP_NUM_THREADS", "KB_TORCH_THREADS", "NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST",
    "NVSHMEM_DISABLE_NVLS", "CC", "CXX", "TRITON_PTXAS_PATH", "NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES",
)

BOOT = "import sys; sys.path.insert(0, {pylib!r}); from evaluation._child import main; main()"
#: A command (a compiler: evaluation.units) confined like the sandbox's processes, then exec'ed.
COMMAND_BOOT = ("import sys, json, os; sys.path.insert(0, {pylib!r}); from evaluation._child import _confine; "
                "spec = json.loads(sys.argv[1]); _confine(spec); os.execvp(spec['argv'][0], spec['argv'])")


#: When a wait for a child's reply ends: a ``time.monotonic()`` time, or a function giving the current one.
Deadline = float | Callable[[], float]
#: What others did for a sandboxed process, counted as its own: (processes started for it, whose
#: trees count; tasks besides them; kB of memory besides them).
Charged = tuple[list[int], int, int]


class ChildError(Exception):
    """A child process died, timed out or broke the protocol."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind  # 'timeout' | 'crashed'
        self.message = message


@functools.lru_cache(maxsize=1)
def detect_isolation() -> dict[str, Any]:
    """Find the strongest isolation this host allows (result cached for the process)."""
    unshare = shutil.which("unshare")
    base = ["--net", "--pid", "--fork", "--kill-child", "--mount", "--mount-proc", "--ipc"]
    info: dict[str, Any] = {"mode": "none", "unshare": unshare, "root": os.geteuid() == 0}
    if os.environ.get("KB_SANDBOX_ISOLATION") == "none":
        info["reason"] = "disabled by KB_SANDBOX_ISOLATION=none"
        return info
    if unshare:
        candidates = []
        if os.geteuid() == 0:
            candidates.append(("root", [unshare, *base]))
        candidates.append(("userns", [unshare, "--user", "--map-root-user", *base]))
        for mode, prefix in candidates:
            try:
                r = subprocess.run([*prefix, "true"], capture_output=True, timeout=20)
            except (OSError, subprocess.TimeoutExpired) as exc:
                info.setdefault("errors", []).append(f"{mode}: {exc}")
                continue
            if r.returncode == 0:
                info["mode"] = mode
                info["prefix"] = prefix
                return info
            info.setdefault("errors", []).append(f"{mode}: {r.stderr.decode(errors='replace').strip()[:200]}")
    return info


def work_root() -> str | None:
    """Where per-evaluation directories go: $KB_WORK_DIR, else /dev/shm when it has >= 16 GiB free
    (outputs of GPU-sized problems travel through files, and memory-backed files are much faster),
    else the default temporary directory."""
    env = os.environ.get("KB_WORK_DIR")
    if env:
        return env
    try:
        st = os.statvfs("/dev/shm")
        if st.f_bavail * st.f_frsize >= 16 * 2**30 and os.access("/dev/shm", os.W_OK):
            return "/dev/shm"
    except OSError:
        pass
    return None


def _world_traversable(path: str) -> bool:
    try:
        return bool(os.stat(path).st_mode & stat.S_IXOTH)
    except OSError:
        return True


def needed_paths(extra: list[str]) -> list[str]:
    """Paths a sandboxed Python with torch must be able to reach, each as written and resolved (a venv
    reached through a symlink is re-exposed at both places)."""
    paths = {sys.prefix, sys.base_prefix, os.path.dirname(sys.executable),
             os.path.dirname(os.path.realpath(sys.executable)), PACKAGE_DIR}
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        p = sysconfig.get_paths().get(key)
        if p:
            paths.add(p)
    try:
        for mod in ("torch", "triton", "numpy", "ninja"):
            spec = importlib.util.find_spec(mod)
            if spec and spec.origin:
                paths.add(os.path.dirname(os.path.dirname(spec.origin)))
    except (ImportError, ValueError):
        pass
    paths.update(extra)
    found = {p for p in paths if p and os.path.exists(p)}
    return sorted({os.path.abspath(p) for p in found} | {os.path.realpath(p) for p in found})


def hidden_directories(hide: tuple[str, ...]) -> list[str]:
    """What a sandbox hides, whatever a kernel needs: the homes (the worker's own too), the checkout
    holding this package (the site's settings and code; the package itself is re-exposed), and
    ``hide``."""
    out = ["/home", "/root", os.path.expanduser("~"), os.path.dirname(PACKAGE_DIR), *hide]
    return [d for d in out if d not in ("/", "") and os.path.isdir(d)]


#: Directories every sandboxed process gets its own copy of (a folder of its work directory bind-mounted
#: in their place, so whatever a kernel leaves there goes when the sandbox's tree is removed). The
#: three are folders of one tmpfs of the process's own (``TMPFS_FOLDER``, mounted in its mount
#: namespace, ``tmp_limit_mb`` in all): a work directory in /dev/shm is memory, and what a kernel
#: writes there no process's memory counts.
PRIVATE_DIRECTORIES = {"/tmp": "tmp", "/var/tmp": "var-tmp", "/dev/shm": "dev-shm"}
TMPFS_FOLDER = "tmpfs"


@functools.lru_cache(maxsize=1)
def world_writable_directories() -> list[str]:
    """Other directories anyone may write into (/run/lock, /var/crash, /dev/mqueue, ...), found once
    under /var, /run and /dev two levels deep: covered by an empty tmpfs that the sandbox's uid
    cannot write, so nothing is left there either."""
    found: list[str] = []
    private = {os.path.realpath(d) for d in PRIVATE_DIRECTORIES}
    todo = [("/var", 1), ("/run", 1), ("/dev", 1)]
    while todo:
        top, depth = todo.pop()
        try:
            entries = list(os.scandir(top))
        except OSError:
            continue
        for entry in entries:
            try:
                if not entry.is_dir(follow_symlinks=False):
                    continue
                mode = entry.stat(follow_symlinks=False).st_mode
            except OSError:
                continue
            real = os.path.realpath(entry.path)
            if mode & stat.S_IWOTH and real not in private and not any(real.startswith(p + os.sep) for p in private):
                found.append(real)
            elif depth < 2:
                todo.append((entry.path, depth + 1))
    return sorted(found)


def nproc_counts_sandbox_only(mode: str, switch_uid: bool) -> bool:
    """Whether RLIMIT_NPROC would count the sandbox's own tasks only: as a uid of its own (root mode),
    or in a user namespace of its own on Linux >= 5.14 (per-namespace counts). Elsewhere it counts
    every process of the worker's user, so only the watchdog limits tasks."""
    if mode == "root":
        return switch_uid
    if mode == "userns":
        try:
            major, minor = (int(x) for x in platform.release().split(".")[:2])
        except ValueError:
            return False
        return (major, minor) >= (5, 14)
    return False


def sandbox_prefix(pgid: int) -> str:
    """How the per-evaluation folders of process group ``pgid`` are named. A worker's work horse
    leads its own group, so the worker finds the folders of a horse that was killed before it could
    remove them (``remove_group_trees``)."""
    return f"kb-eval-g{pgid}-"


def remove_group_trees(pgid: int) -> list[str]:
    """Remove the sandbox folders that processes of the group ``pgid`` (now dead: a killed work
    horse) left in the work roots, by descriptors (``safe_files.remove_tree``). Returns their paths."""
    return [path for path, _, _ in _sandbox_trees(lambda group, _: group == pgid) if _removed(path)]


def remove_orphaned_trees(min_age_s: float) -> list[str]:
    """Remove the sandbox folders of process groups that no longer exist, made more than
    ``min_age_s`` ago: what a whole worker killed at once (its horse with it, nobody left to call
    ``remove_group_trees``) or a scratch folder read-only at the time left behind. A folder whose
    group still runs is an evaluation in progress and stays; so does a young one (its group may
    live in another PID namespace that shares the folder). Returns the paths removed."""
    now = time.time()
    return [
        path
        for path, _, _ in _sandbox_trees(lambda group, st: now - st.st_mtime > min_age_s and not _group_alive(group))
        if _removed(path)
    ]


_SANDBOX_NAME = re.compile(r"kb-eval-g(\d+)-")


def _sandbox_trees(chosen: Callable[[int, os.stat_result], bool]) -> list[tuple[str, int, os.stat_result]]:
    """(path, process group, lstat) of this user's sandbox folders in the work roots for which
    ``chosen(group, lstat)`` is true."""
    found = []
    for root in sorted({r for r in (work_root(), "/dev/shm", tempfile.gettempdir()) if r}):
        try:
            names = os.listdir(root)
        except OSError:
            continue
        for name in names:
            match = _SANDBOX_NAME.match(name)
            if not match:
                continue
            path = os.path.join(root, name)
            try:
                st = os.lstat(path)
            except OSError:
                continue
            # One this worker's user made (never through a link).
            if stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid() and chosen(int(match.group(1)), st):
                found.append((path, int(match.group(1)), st))
    return found


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # EPERM: it exists, as another user's
        return True
    return True


def _removed(path: str) -> bool:
    """Remove one sandbox folder; False when it cannot be now (a read-only file system: tried
    again at the next sweep)."""
    try:
        remove_tree(path)
    except OSError:
        return False
    return not os.path.lexists(path)


def compute_masks(needed: list[str], hide: tuple[str, ...],
                  private: dict[str, str] | None = None) -> list[list[Any]]:
    """What to mount over which directory: ``[directory, [needed paths re-exposed below it], source]``.

    ``source`` None: an empty tmpfs (hidden directories, and ancestors of needed paths that others
    cannot traverse); a path: that directory (or file) bind-mounted in its place (``private``: /tmp
    -> the process's own temporary directory, /etc/passwd -> a list of two accounts)."""
    targets: dict[str, str | None] = {}
    for p in needed:
        parts = p.split(os.sep)
        for i in range(2, len(parts)):
            anc = os.sep.join(parts[:i])
            if not _world_traversable(anc):
                targets.setdefault(os.path.realpath(anc), None)
                break
    for h in hide:
        if os.path.isdir(h):
            targets.setdefault(os.path.realpath(h), None)
    for directory, source in (private or {}).items():
        if os.path.exists(directory):
            targets[os.path.realpath(directory)] = source
    # Outer masks first; drop a target nested in another target (the outer one hides it).
    kept: list[str] = []
    for t in sorted(targets, key=len):
        if not any(t.startswith(k + os.sep) for k in kept):
            kept.append(t)
    masks = []
    for t in kept:
        exposed = [p for p in needed if p == t or p.startswith(t + os.sep)]
        if t in exposed:  # a needed path is the masked directory itself: cannot hide it
            continue
        masks.append([t, exposed, targets[t]])
    return masks


def process_tree(pid: int, children: dict[int, list[int]] | None = None) -> list[int]:
    if children is None:
        children = process_table()[0]
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(children.get(p, []))
    return out


_CLK_TCK = os.sysconf("SC_CLK_TCK")


class SandboxProcess:
    """One sandboxed child (role 'reference' or 'kernel')."""

    def __init__(self, role: str, spec: dict[str, Any], env: dict[str, str], prefix: list[str], log_path: str,
                 memory_limit_mb: int, max_processes: int = DEFAULT_MAX_PROCESSES) -> None:
        self.role = role
        self.spec = spec
        self.env = env
        self.prefix = prefix
        self.log_path = log_path
        self.memory_limit_mb = memory_limit_mb
        self.max_processes = max_processes
        self.memory = MemoryMeter(memory_limit_mb)
        #: What others do for this process and is counted as its own (a build's unit server:
        #: evaluation.units.UnitServer.charged): the processes started for it, tasks and memory (kB).
        self.charged: Callable[[], Charged] | None = None
        #: Its work folder's files count as its memory (in /dev/shm they are memory, and each is bounded
        #: only by the file size limit); not the reference's: trusted code, and the kernel's outputs
        #: are handed over into its folder.
        self.folder = None if role.startswith("reference") else FolderMeter(spec["workdir"])
        self._limits_lock = threading.Lock()  # the watchdog's thread and check_limits measure alike
        self.proc: subprocess.Popen[bytes] | None = None
        self.killed_reason: str | None = None
        self.peak_rss_mb = 0.0
        self.peak_tasks = 0
        self._buf = b""
        self._nonce: str | None = None
        self.forged = 0

    def start(self, pylib: str) -> None:
        cmd_r, cmd_w = os.pipe()
        resp_r, resp_w = os.pipe()
        # A Unix socket that carries file descriptors only (GPU buffers shared through cuda_ipc).
        self.fd_sock, child_sock = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        spec = dict(self.spec, cmd_fd=cmd_r, resp_fd=resp_w, fd_sock=child_sock.fileno())
        argv = [*self.prefix, sys.executable, "-I", "-c", BOOT.format(pylib=pylib), json.dumps(spec)]
        # The worker's own (0600): one sandbox's processes never read another's log.
        self._log = os.fdopen(os.open(self.log_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                                      0o600), "wb")
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT, env=self.env,
            cwd=self.spec["workdir"], pass_fds=(cmd_r, resp_w, child_sock.fileno()), start_new_session=True,
            close_fds=True,
        )
        os.close(cmd_r)
        os.close(resp_w)
        child_sock.close()
        self._cmd_w = cmd_w
        self._resp_r = resp_r

    def recv_fd(self, deadline: float) -> int:
        """The next file descriptor the child sent on its descriptor socket."""
        remaining = max(0.0, deadline - time.monotonic())
        r, _, _ = select.select([self.fd_sock], [], [], min(remaining, 30.0))
        if not r:
            raise ChildError("crashed", f"the {self.role} process announced a shared buffer but sent none")
        _msg, fds, _flags, _addr = socket.recv_fds(self.fd_sock, 1, 4)
        for extra in fds[1:]:
            os.close(extra)
        if not fds:
            raise ChildError("crashed", f"the {self.role} process sent no descriptor")
        return fds[0]

    def send_fd(self, fd: int) -> None:
        try:
            socket.send_fds(self.fd_sock, [b"F"], [fd])
        except OSError as exc:
            raise self._death_error(f"could not pass a buffer to the {self.role} process: {exc}") from exc

    # -- protocol ------------------------------------------------------------------------------
    def send(self, msg: dict[str, Any]) -> None:
        self._nonce = secrets.token_hex(8)
        msg = dict(msg, nonce=self._nonce)
        try:
            os.write(self._cmd_w, (json.dumps(msg) + "\n").encode())
        except OSError as exc:
            raise self._death_error(f"could not write to the {self.role} process: {exc}") from exc

    def recv(self, deadline: Deadline) -> dict[str, Any]:
        """Next reply carrying the nonce of the last request; other lines are forged and dropped.
        ``deadline``: a time, or a function giving it (a build's moves while it waits for the host)."""
        while True:
            msg = self._recv_line(deadline)
            if self._nonce is None or msg.get("nonce") == self._nonce:
                return msg
            self.forged += 1

    def _recv_line(self, deadline: Deadline) -> dict[str, Any]:
        assert self.proc is not None
        while b"\n" not in self._buf:
            remaining = (deadline() if callable(deadline) else deadline) - time.monotonic()
            if remaining <= 0:
                self.kill()
                raise ChildError("timeout", f"the {self.role} process did not answer within the time limit")
            r, _, _ = select.select([self._resp_r], [], [], min(remaining, 0.5))
            if r:
                chunk = os.read(self._resp_r, 1 << 20)
                if not chunk:
                    raise self._death_error(None)
                self._buf += chunk
                if len(self._buf) > 64 * 2**20:
                    self.kill()
                    raise ChildError("crashed", f"the {self.role} process flooded its reply channel")
            elif self.killed_reason or self.proc.poll() is not None:
                raise self._death_error(None)
        line, self._buf = self._buf.split(b"\n", 1)
        try:
            msg = json.loads(line)
        except ValueError:
            msg = None
        if not isinstance(msg, dict):
            if self._nonce is not None:
                return {}  # not ours: counted as forged by recv()
            self.kill()
            raise ChildError("crashed", f"the {self.role} process broke the reply protocol")
        return msg

    def request(self, msg: dict[str, Any], deadline: Deadline) -> dict[str, Any]:
        self.send(msg)
        return self.recv(deadline)

    def _death_error(self, detail: str | None) -> ChildError:
        assert self.proc is not None
        try:
            rc = self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.kill()
            rc = self.proc.wait()
        if self.killed_reason:
            return ChildError("crashed", self.killed_reason)
        if rc is not None and rc < 0:
            try:
                name = signal.Signals(-rc).name
            except ValueError:
                name = str(-rc)
            reason = f"the {self.role} process was killed by signal {name}"
        else:
            reason = f"the {self.role} process exited unexpectedly with status {rc}"
        if detail:
            reason += f" ({detail})"
        return ChildError("crashed", reason)

    # -- lifetime ------------------------------------------------------------------------------
    def tree(self, children: dict[int, list[int]] | None = None) -> list[int]:
        """This process and its descendants, and the processes started for it (``charged``)."""
        if self.proc is None:
            return []
        if children is None:
            children = process_table()[0]
        roots = [self.proc.pid, *(self.charged()[0] if self.charged is not None else [])]
        return [pid for root in roots for pid in process_tree(root, children)]

    def cpu_seconds(self) -> float:
        """CPU time (user + system) used so far by this process tree, all threads included."""
        total = 0
        for pid in self.tree():
            try:
                with open(f"/proc/{pid}/stat", "rb") as fh:
                    fields = fh.read().rsplit(b")", 1)[1].split()
                total += int(fields[11]) + int(fields[12])
            except (OSError, IndexError, ValueError):
                pass
        return total / _CLK_TCK

    def check_limits(self) -> str | None:
        """Measured now, not when the watchdog next looks: why this process tree must end, having
        killed it, or None. Taken when a reply says the request failed, so that a tree that went over
        its limit and then failed is judged by the limit, whatever the watchdog's pace (a loaded host
        slows its thread; a kernel writes a gigabyte in a fraction of its interval)."""
        if self.proc is None or self.proc.poll() is not None:
            return self.killed_reason
        reason = self.limit_exceeded(*process_table(), fresh=True)
        if reason:
            self.kill(reason)
        return reason

    def limit_exceeded(self, children: dict[int, list[int]], threads: dict[int, int],
                       fresh: bool = False) -> str | None:
        """Why this process tree must end (too many tasks, too much memory), or None. The task count
        comes first: it is cheap, and a fork bomb would otherwise be read as a memory hog. ``fresh``:
        every meter measures now, whenever it last did."""
        with self._limits_lock:
            return self._limit_exceeded(children, threads, fresh)

    def _limit_exceeded(self, children: dict[int, list[int]], threads: dict[int, int], fresh: bool) -> str | None:
        assert self.proc is not None
        _, extra_tasks, extra_kb = self.charged() if self.charged is not None else ([], 0, 0)
        pids = self.tree(children)
        tasks = sum(threads.get(p, 1) for p in pids) + extra_tasks
        self.peak_tasks = max(self.peak_tasks, tasks)
        with_charged = ", with what was done for it" if self.charged is not None else ""
        if tasks > self.max_processes:
            return (f"the {self.role} process started too many processes ({tasks} processes and threads"
                    f"{with_charged} > {self.max_processes})")
        folder_kb, entries = self.folder.measure(pids, fresh) if self.folder is not None else (0, 0)
        if self.folder is not None and entries > self.folder.max_entries:
            return (f"the {self.role} process kept too many files (more than {self.folder.max_entries} in its work "
                    "folder and open)")
        over, rss_mb, pss_mb = self.memory.over_limit(pids, extra_kb + folder_kb, fresh)
        self.peak_rss_mb = max(self.peak_rss_mb, rss_mb)
        if over:
            files = f", {folder_kb / 1024:.0f} MB of it files in its work folder or memory files" if folder_kb >= 1024 else ""
            return (f"the {self.role} process exceeded the memory limit ({pss_mb:.0f} MB proportional set size"
                    f"{with_charged}{files} > {self.memory_limit_mb} MB)")
        return None

    def kill(self, reason: str | None = None) -> None:
        if reason and not self.killed_reason:
            self.killed_reason = reason
        if self.proc is None:
            return
        for _ in range(10):
            pids = self.tree()
            if self.proc.poll() is not None and len(pids) <= 1:
                break
            for p in reversed(pids):
                try:
                    os.kill(p, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            time.sleep(0.02)
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass

    def close(self, graceful: bool = True) -> None:
        if self.proc is None:
            return
        if graceful and self.proc.poll() is None:
            try:
                self.send({"op": "exit"})
                self.proc.wait(timeout=3)
            except (ChildError, subprocess.TimeoutExpired, OSError):
                pass
        self.kill()
        for fd in (self._cmd_w, self._resp_r):
            try:
                os.close(fd)
            except OSError:
                pass
        self.fd_sock.close()
        self._log.close()

    def read_log(self, limit: int = 20000) -> str:
        try:
            with open(self.log_path, "rb") as fh:
                fh.seek(0, os.SEEK_END)
                size = fh.tell()
                fh.seek(max(0, size - limit))
                return fh.read().decode(errors="replace")
        except OSError:
            return ""


class Sandbox:
    """A per-evaluation temporary tree plus the child processes started in it."""

    def __init__(self, *, device: str, size_scale: int, memory_limit_mb: int, hide_paths: tuple[str, ...] = (),
                 isolation: str = "auto", build_dir: str | None = None, disable: frozenset[str] = frozenset(),
                 cpu_threads: int | None = None, max_processes: int = DEFAULT_MAX_PROCESSES,
                 file_size_limit_mb: int | None = None, extra_env: dict[str, str] | None = None,
                 expose: tuple[str, ...] = (), tmp_limit_mb: int | None = None) -> None:
        self.device = device
        self.size_scale = size_scale
        self.memory_limit_mb = memory_limit_mb
        self.max_processes = max_processes
        self.file_size_limit_mb = file_size_limit_mb or memory_limit_mb
        self.tmp_limit_mb = tmp_limit_mb or default_tmp_limit_mb(memory_limit_mb)
        self.disable = disable
        self.cpu_threads = cpu_threads
        # Set last in every child's environment (the build stage hides the GPUs and names the target
        # architecture; the GPU phase names the same architecture, so that the build is up to date).
        self.extra_env = dict(extra_env or {})
        self.iso = detect_isolation() if isolation == "auto" else {"mode": "none", "reason": "isolation='none'"}
        self.mode = self.iso["mode"]
        self.root = tempfile.mkdtemp(prefix=sandbox_prefix(os.getpgrp()), dir=work_root())
        os.chmod(self.root, 0o711)
        self.pylib = os.path.join(self.root, "pylib")
        os.mkdir(self.pylib)
        os.symlink(PACKAGE_DIR, os.path.join(self.pylib, "evaluation"))
        os.chmod(self.pylib, 0o755)
        self.src = os.path.join(self.root, "src")
        os.mkdir(self.src)
        os.chmod(self.src, 0o755)
        self.build_dir = build_dir
        # The cache root too: the entry itself may appear only later (built by the build stage).
        extra = [self.root, *expose] + ([build_dir, os.path.dirname(build_dir)] if build_dir else [])
        for var in ("CUDA_HOME", "CUDA_PATH"):
            if os.environ.get(var):
                extra.append(os.environ[var])
        if os.path.isdir("/usr/local/cuda"):
            extra.append("/usr/local/cuda")
        self.needed = needed_paths(extra)
        self.hidden = hidden_directories(hide_paths) + world_writable_directories()
        self.masks: list[list[Any]] = []  # those of the last process started (the kernel's, in an evaluation)
        self.switch_uid = self.mode == "root" and os.environ.get("KB_SANDBOX_SWITCH_UID", "1") != "0"
        self.nproc_limited = nproc_counts_sandbox_only(self.mode, self.switch_uid)
        base = int(os.environ.get("KB_SANDBOX_UID_BASE", 0)) or (200000 + 2 * secrets.randbelow(400000))
        # "unit": the unit server's compiler (evaluation.units), in a sandbox of its own, no kernel's uid.
        self.uids = {"reference": base, "kernel": base + 1, "build": base + 1, "unit": base}
        self.procs: list[SandboxProcess] = []
        self.watchdog = Watchdog()
        self.watchdog.start()

    def write_source(self, name: str, text: str) -> str:
        path = os.path.join(self.src, name)
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.chmod(path, 0o644)
        return path

    def _env(self, workdir: str, role: str) -> dict[str, str]:
        exe_dir = os.path.dirname(sys.executable)
        path = [exe_dir]
        for cand in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
            if cand and os.path.isdir(os.path.join(cand, "bin")):
                path.append(os.path.join(cand, "bin"))
        path += ["/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"]
        env = {
            "PATH": ":".join(dict.fromkeys(path)),
            "HOME": workdir,
            # Also where /tmp is (its own) in isolated modes; in mode 'none' the only private temp folder.
            "TMPDIR": os.path.join(workdir, TMPFS_FOLDER, "tmp"),
            "TMP": os.path.join(workdir, TMPFS_FOLDER, "tmp"),
            "TEMP": os.path.join(workdir, TMPFS_FOLDER, "tmp"),
            "LANG": "C.UTF-8",
            "KB_SCALE": str(self.size_scale),
            "PYTHONDONTWRITEBYTECODE": "1",
            "PYTHONUNBUFFERED": "1",
            "OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY", "PASSIVE"),
            # No network in the sandbox: Hugging Face libraries must fail at once, not retry.
            "HF_HUB_OFFLINE": "1",
            "USER": "kb-sandbox",  # the sandbox's uid has no passwd entry; getpass.getuser() reads this
            "LOGNAME": "kb-sandbox",
            "TRANSFORMERS_OFFLINE": "1",
        }
        for var in PASS_THROUGH_ENV:
            if var in os.environ:
                env[var] = os.environ[var]
        if self.cpu_threads:
            env["KB_TORCH_THREADS"] = str(self.cpu_threads)
            env["OMP_NUM_THREADS"] = str(self.cpu_threads)
        if "env_scrub" in self.disable:  # test-only switch: show what an unscrubbed environment leaks
            env = {**os.environ, **env}
        if role in ("kernel", "build") and self.build_dir:
            env["TORCH_EXTENSIONS_DIR"] = os.path.join(self.build_dir, "torch_extensions")
            env["TRITON_CACHE_DIR"] = os.path.join(self.build_dir, "triton")
        env.update(self.extra_env)
        return env

    def _confinement(self, role: str) -> tuple[str, dict[str, Any], list[str]]:
        """A role's work folder (made, its uid's), its confinement spec and the command prefix."""
        workdir = os.path.join(self.root, role)
        uid = self.uids["reference" if role.startswith("reference") else role] if self.switch_uid else None
        tmpfs = os.path.join(workdir, TMPFS_FOLDER)
        private = {target: os.path.join(tmpfs, name) for target, name in PRIVATE_DIRECTORIES.items()}
        for d in (workdir, tmpfs, *private.values()):
            os.mkdir(d, 0o700)
            if uid is not None:
                os.chown(d, uid, uid)
        masks = []
        if self.mode in ("root", "userns"):
            # First: the tmpfs over <workdir>/tmpfs, then its folders bind-mounted over /tmp and the others.
            options = f"size={self.tmp_limit_mb}m,nr_inodes={TMP_MAX_INODES},mode=0711"
            masks = [[tmpfs, [], {"options": options, "folders": list(PRIVATE_DIRECTORIES.values()), "uid": uid}],
                     *compute_masks(self.needed, tuple(self.hidden), {**private, **self._accounts(role, uid, workdir)})]
        self.masks = masks
        spec = {"role": role, "workdir": workdir, "uid": uid, "gid": uid, "masks": masks, "rlimits": self._rlimits()}
        prefix = list(self.iso.get("prefix", [])) if self.mode != "none" else []
        if prefix:
            prefix.append("--")
        return workdir, spec, prefix

    def command(self, role: str, argv: list[str]) -> tuple[list[str], dict[str, str], str]:
        """``argv`` (a compiler) confined like the sandbox's processes (namespaces, mounts, rlimits,
        the role's uid, no_new_privs), as (the command to start, its environment, its work folder)."""
        workdir, spec, prefix = self._confinement(role)
        spec["argv"] = list(argv)
        boot = [sys.executable, "-I", "-c", COMMAND_BOOT.format(pylib=self.pylib), json.dumps(spec)]
        return [*prefix, *boot], self._env(workdir, role), workdir

    def spawn(self, role: str, problem_path: str, kernel_path: str | None = None) -> SandboxProcess:
        workdir, spec, prefix = self._confinement(role)
        spec.update(device=self.device, problem_path=problem_path, kernel_path=kernel_path,
                    disable=sorted(self.disable))
        p = SandboxProcess(role, spec, self._env(workdir, role), prefix, os.path.join(self.root, f"{role}.log"),
                           self.memory_limit_mb, self.max_processes)
        p.start(self.pylib)
        self.procs.append(p)
        self.watchdog.add(p)
        return p

    def _accounts(self, role: str, uid: int | None, workdir: str) -> dict[str, str]:
        """/etc/passwd and /etc/group as the process sees them: root and its own uid, not the host's
        users (bind-mounted over the real ones; root-owned, so the process cannot change them)."""
        folder = os.path.join(self.root, f"accounts-{role}")
        os.mkdir(folder, 0o755)
        passwd, group = "root:x:0:0:root:/root:/usr/sbin/nologin\n", "root:x:0:\n"
        if uid is not None:
            passwd += f"kb-sandbox:x:{uid}:{uid}:KernelBench sandbox:{workdir}:/usr/sbin/nologin\n"
            group += f"kb-sandbox:x:{uid}:\n"
        files = {}
        for target, text in (("/etc/passwd", passwd), ("/etc/group", group)):
            path = os.path.join(folder, os.path.basename(target))
            with open(path, "w", encoding="ascii") as fh:
                fh.write(text)
            os.chmod(path, 0o644)
            files[target] = path
        return files

    def _rlimits(self) -> dict[str, int]:
        rlimits: dict[str, int] = {"RLIMIT_CORE": 0, "RLIMIT_FSIZE": self.file_size_limit_mb * 2**20}
        if self.device == "cpu":
            # Address-space cap as a backstop behind the memory watchdog (it breaks CUDA, so CPU only).
            rlimits["RLIMIT_AS"] = (self.memory_limit_mb + 6144) * 2**20
        if self.nproc_limited:
            rlimits["RLIMIT_NPROC"] = self.max_processes + NPROC_HEADROOM
        return rlimits

    def hand_over(self, src: SandboxProcess, dst: SandboxProcess, name: str, new_name: str) -> str:
        """Move an output file from one child's directory into another's and give it to the receiving
        child's uid (``safe_files.take_over``: by descriptor, refusing links, non-regular files, files
        of another uid and a file swapped while it moves). Returns the new file name."""
        if not name or "/" in name or name.startswith("."):
            raise ChildError("crashed", f"the {src.role} process named an invalid output file")
        try:
            take_over(src.spec["workdir"], name, dst.spec["workdir"], new_name, dst.spec.get("uid"),
                      src.spec.get("uid"))
        except UnsafeFile as exc:
            raise ChildError("crashed", f"the {src.role} process left an invalid output file: {exc}") from exc
        return new_name

    def read_output(self, proc: SandboxProcess, name: str, max_bytes: int = 16 * 2**30) -> Any:
        """Load an output file written by a child, refusing links and non-regular files."""
        import torch  # deferred: torch is heavy; only check_problem reads outputs in the parent

        if "/" in name or name.startswith("."):
            raise ChildError("crashed", f"the {proc.role} process named an invalid output file")
        path = os.path.join(proc.spec["workdir"], name)
        try:
            data = read_capped(path, max_bytes)
        except UnsafeFile as exc:
            raise ChildError("crashed", f"the {proc.role} process left an invalid output file: {exc}") from exc
        os.unlink(path)
        return torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)

    def environment(self) -> dict[str, Any]:
        first = next((p for p in self.procs if p.role == "kernel"), None)
        isolated = self.mode in ("root", "userns")
        return {
            "isolation_mode": self.mode,
            "network_isolated": isolated,
            "pid_namespace": isolated,
            "private_tmp": isolated,  # /tmp, /var/tmp, /dev/shm: the process's own, removed afterwards
            "uid": self.uids["kernel"] if self.switch_uid else os.getuid(),
            "reference_uid": self.uids["reference"] if self.switch_uid else os.getuid(),
            "hidden_paths": [m[0] for m in self.masks if m[2] is None],
            "memory_limit": ("rlimit_as+pss_watchdog" if self.device == "cpu" else "pss_watchdog"),
            "memory_limit_mb": self.memory_limit_mb,
            "process_limit": "rlimit_nproc+watchdog" if self.nproc_limited else "watchdog",
            "max_processes": self.max_processes,
            "file_size_limit_mb": self.file_size_limit_mb,
            "tmp_limit_mb": self.tmp_limit_mb if isolated else None,
            "kernel_peak_rss_mb": round(first.peak_rss_mb, 1) if first else None,
            "kernel_peak_tasks": first.peak_tasks if first else None,
        }

    def close(self) -> None:
        self.watchdog.stop()
        for p in self.procs:
            try:
                p.close(graceful=False)
            except Exception:  # noqa: BLE001
                pass
        remove_tree(self.root)

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
