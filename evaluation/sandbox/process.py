"""One sandboxed process seen from its parent: its start, the JSON line channel on its own pipes,
the descriptors it shares, its limits and its end."""

from __future__ import annotations

import json
import os
import secrets
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from evaluation.sandbox.limits import (
    DEFAULT_MAX_PROCESSES,
    FolderMeter,
    MemoryMeter,
    process_table,
    stat_fields,
)
from evaluation.sandbox.protocol import ExitRequest, Request

BOOT = "import sys; sys.path.insert(0, {pylib!r}); from evaluation.child.harness import main; main()"


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

#: How long a killed tree may take to exit. The sandboxed Python runs as PID 1 behind `unshare
#: --fork`: once `unshare` is reaped it is no longer our child, and it may still be exiting (a
#: process holding tens of GB of GPU memory gives it back as it exits), so the next evaluation on the
#: GPU waits for it rather than loading beside its memory.
EXIT_WAIT_S = 10.0


def _kill_all(pids: list[int]) -> None:
    for p in reversed(pids):
        try:
            os.kill(p, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def _stat(pid: int) -> tuple[str, int] | None:
    """The process's state letter (``Z`` for a zombie, whose memory is given back) and start time
    (which tells a reused PID from the process seen), None if gone."""
    fields = stat_fields(pid)
    try:
        return (fields[0].decode(), int(fields[19])) if fields is not None else None
    except (IndexError, ValueError):
        return None


def wait_exited(seen: dict[int, int], timeout_s: float,
                stat: Callable[[int], tuple[str, int] | None] = _stat) -> list[int]:
    """Wait until every process of ``seen`` (PID -> start time; killed already, and SIGKILL is not
    refused) has exited: gone, a zombie (which holds no memory), or its PID another process's. The
    PIDs still running after ``timeout_s`` are returned."""
    deadline = time.monotonic() + timeout_s
    left = sorted(seen)
    while True:
        left = [p for p in left if _running(stat(p), seen[p])]
        if not left or time.monotonic() >= deadline:
            return left
        time.sleep(0.01)


def _running(found: tuple[str, int] | None, started: int) -> bool:
    return found is not None and found[0] != "Z" and found[1] == started


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
        #: evaluation.builds.units.UnitServer.charged): the processes started for it, tasks and memory (kB).
        self.charged: Callable[[], Charged] | None = None
        #: Its work folder's files count as its memory (in /dev/shm they are memory, and each is bounded
        #: only by the file size limit); not the reference's: trusted code, and the kernel's outputs
        #: are handed over into its folder.
        self.folder = None if role.startswith("reference") else FolderMeter(spec["workdir"])
        self._limits_lock = threading.Lock()  # the watchdog's thread and check_limits measure alike
        self.proc: subprocess.Popen[bytes] | None = None
        self.killed_reason: str | None = None
        self.unexited: list[int] = []  # killed processes of its tree still running after EXIT_WAIT_S
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
    def send(self, request: Request) -> None:
        self._nonce = secrets.token_hex(8)
        msg = dict(request.message(), nonce=self._nonce)
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

    def request(self, request: Request, deadline: Deadline) -> dict[str, Any]:
        self.send(request)
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
            fields = stat_fields(pid)
            try:
                total += int(fields[11]) + int(fields[12]) if fields is not None else 0
            except (IndexError, ValueError):
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
        seen: dict[int, int] = {}
        for _ in range(10):
            pids = self.tree()
            seen.update((p, found[1]) for p in pids if p not in seen and (found := _stat(p)) is not None)
            if self.proc.poll() is not None and len(pids) <= 1:
                break
            _kill_all(pids)
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            time.sleep(0.02)
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        seen.pop(self.proc.pid, None)  # reaped by wait()
        self.unexited = wait_exited(seen, EXIT_WAIT_S)

    def close(self, graceful: bool = True) -> None:
        if self.proc is None:
            return
        if graceful and self.proc.poll() is None:
            try:
                self.send(ExitRequest())
                self.proc.wait(timeout=3)
            except (ChildError, subprocess.TimeoutExpired, OSError):
                pass
        self.kill()
        # Each descriptor forgotten before it is closed: a second close (a sweep's worker closes
        # again what an interrupt cut short) never closes a number the process has since reused.
        for name in ("_cmd_w", "_resp_r"):
            fd = getattr(self, name)
            if fd >= 0:
                setattr(self, name, -1)
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
