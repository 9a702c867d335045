"""The unit cache: no translation unit compiled twice on a host.

Two kernels whose C++ wrapper (``main.cpp``: ``load_inline``'s ``#include <torch/extension.h>``, the
declarations, the bindings) is the same text under the same flags get the same object file, and
compiling it is most of a wrapper's build. But the compilers run inside the kernel's own build
process: an object it produced could be replaced by the kernel before it is published and must
never be served to another kernel. So a shared unit is compiled by a trusted party:

* the build stage starts, for each build process, a **unit server** (a thread of the trusted parent)
  listening on a UNIX socket in the sandbox's folder (``units.sock``, the build uid's), and names
  ``evaluation/builds/unit_cc`` as the build's ``CXX`` (``compiler_env``; the kernel's process at
  evaluation time gets the same ``CXX``, so ninja's commands stay the same and the build up to date);
* for a compile of one unit, ``unit_cc`` (``evaluation/builds/unit_client.py``) sends the unit's text and
  its flags; the server keys them (``unit_key``: the text, the flags, the source's name, the
  compiler's identity, torch, Python, the device, the CUDA toolkit and ``CPATH``, which names the
  precompiled headers' key) and answers with the published object, or, on a miss, compiles the text
  itself: in a fresh sandbox of its own (``Sandbox.command``: another uid, namespaces, rlimits; its
  own empty folder, never the kernel's; includes resolve only from the system's, torch's, Python's
  and CUDA's folders and the precompiled headers), publishes it by ``rename`` and answers with it;
* whatever the server cannot compile the same way is compiled in the build as before: a unit with a
  quoted include beside it, an include through a macro (the client's check), a flag not on the
  server's list (``flags_ok``), a compile that fails or runs past the build's time, no server.
  The kernel's answer never depends on who compiled: the same compiler, flags and text.

Layout under ``<build_cache_dir>/.units/`` (root's, 0700: kernels never read it; the server sends
the object's bytes over the socket):

* ``<key>/unit.o``, ``deps.json`` (the headers outside the system folders the compile read, for the
  build's dependency file), ``meta.json`` (seconds, CPU seconds): a published unit, which only ever
  appears whole (built in ``.building/<key>.<pid>.<random>/``, renamed);
* ``.locks/<key>.lock``: the ``flock`` of whoever compiles ``<key>`` (two builds that need the same
  unit at once: one compiles, the other waits and is served). It dies with its owner: a compile
  killed midway (the server's process SIGKILLed: its compiler dies with it, ``PR_SET_PDEATHSIG``)
  leaves only its private folder, removed by the key's next owner, and nothing anybody waits on.

* ``.slots/<n>.lock``: the host's server compiles at once (``host_compile_slots``), every worker
  process of the host together.

What a build can make its server hold is bounded, and counted as the build's own (``charged``: the
build process's watchdog adds its server's live compilers, request threads and the requests and
objects they hold to the build's tasks and memory, so a build that has the server compile uses no
more than one that compiles itself): ``MAX_CONNECTIONS_PER_BUILD`` request threads (and ``MAX_CONNECTIONS_TOTAL``
per process; a connection beyond is closed at once), requests read whole within ``REQUEST_READ_S``
into at most ``MAX_REQUEST_BYTES``, ``MAX_COMPILES_PER_BUILD`` compiles counted before they run and
run one at a time, each under the build's memory and task limits (``_wait``), waits for a key's
lock or a host slot at most ``lock_wait_s()``. Past any of them the build compiles the unit itself.
Those waits are the host's time (another build compiling the same unit, the host's compilers all
busy), not the kernel's: ``due()``, the build's deadline, moves by them (``HostWaits``, at most
``HOST_WAIT_CAP`` lock waits' worth). The server's compile of the build's own unit is the build's.
Published units are evicted with the build cache (evaluation.builds.cache_evict), by last use.

``KB_UNITS=0`` turns it off (builds call the compiler themselves, as before; the build cache's key
says which, ``build.units_enabled``). Only the C++ wrapper goes through the server: nvcc's ``.cu``
compile is untouched.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import importlib.util
import json
import os
import re
import secrets
import shlex
import signal
import socket
import struct
import sys
import sysconfig
import threading
import time
from collections.abc import Callable
from typing import Any

from evaluation.builds.entry import _remove, cuda_toolkit_version, units_enabled
from evaluation.builds.pch import _die_with_parent, compiler_identity
from evaluation.builds.unit_client import MAX_REQUEST_BYTES, server_refuses
from evaluation.builds.unit_names import bind_name, module_name, shared_flags
from evaluation.results.harness_id import torch_version
from evaluation.sandbox.limits import DEFAULT_MAX_PROCESSES, MemoryMeter, process_table
from evaluation.sandbox.safe_files import UnsafeFile, read_below, write_new

UNITS_FORMAT = "1"
PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
SHIM = os.path.join(PACKAGE_DIR, "unit_cc")
#: A wrapper's object is 1-3 MB (tens with ``-g``); a larger one is not served (the build compiles it).
MAX_OBJECT_BYTES = 64 * 2**20
MAX_DEPS_BYTES = 2**20
#: Units one build may have the server compile (a load_inline build has one wrapper): counted when
#: the compile is taken, before it runs, so concurrent requests cannot pass it.
MAX_COMPILES_PER_BUILD = 4
#: Connections one build's server handles at once (one thread each); more are closed at once (their
#: compiles run in the build). Every server of this process together: ``MAX_CONNECTIONS_TOTAL``.
MAX_CONNECTIONS_PER_BUILD = 4
MAX_CONNECTIONS_TOTAL = 64
#: Seconds a client has to send its whole request (one slow client holds its connection no longer).
REQUEST_READ_S = 10.0
NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}\.(cpp|cc|cxx)")
#: Flags the server compiles with (no path in any, but ``-D``'s text): optimisation, language,
#: warnings, code generation, macros. ``-isystem``/``-I`` only for the include folders it trusts.
SAFE_FLAG = re.compile(
    r"-(D\S+|U\w+|O[0-3sgz]?|Ofast|g[0-3]?|std=[\w+]+|w|W(?![lap],)[\w=+-]*|pthread|pedantic(-errors)?|"
    r"f(?!plugin|profile|auto-profile|dump|coverage|opt-info|callgraph|stack-usage|[\w-]*prefix-map)[\w+=.,-]+|"
    r"m[\w=.,+-]+)")
_ALL_CONNECTIONS = threading.BoundedSemaphore(MAX_CONNECTIONS_TOTAL)
#: Lock waits' worth (``lock_wait_s()`` each) by which a build's deadline may move: one wait for a
#: unit another build compiles and one for a compile slot.
HOST_WAIT_CAP = 2


def lock_wait_s() -> float:
    """How long a request waits for a unit another build compiles, or for a compile slot of the host
    (``$KB_UNIT_LOCK_WAIT_S``, 90): then its build compiles the unit itself."""
    return float(os.environ.get("KB_UNIT_LOCK_WAIT_S") or 90)


def host_compile_slots() -> int:
    """Server compiles the host runs at once, all builds together (``$KB_UNIT_HOST_COMPILES``, else
    half the cores): a flood of requests from many builds waits for a slot, then is refused."""
    configured = os.environ.get("KB_UNIT_HOST_COMPILES")
    return max(1, int(configured) if configured else (os.cpu_count() or 2) // 2)


enabled = units_enabled


def compiler_env() -> dict[str, str]:
    """What build and kernel processes get when units are on: ``CXX`` is the shim (the same for
    both, so that ninja's commands are the same), which runs ``KB_UNIT_CXX`` when not served."""
    if not enabled():
        return {}
    return {"CXX": SHIM, "KB_UNIT_CXX": os.environ.get("CXX", "c++"), "KB_UNIT_PYTHON": sys.executable}


@functools.lru_cache(maxsize=1)
def trusted_include_roots() -> tuple[str, ...]:
    """Folders whose headers are the same for every build of the host: torch's, Python's, CUDA's, the system's."""
    roots = ["/usr/include", "/usr/local/include"]
    spec = importlib.util.find_spec("torch")  # not imported: the worker never imports torch
    if spec and spec.origin:
        roots.append(os.path.join(os.path.dirname(spec.origin), "include"))
    roots += [sysconfig.get_paths().get("include") or "", sysconfig.get_paths().get("platinclude") or ""]
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(var):
            roots.append(os.path.join(os.environ[var], "include"))
    roots.append("/usr/local/cuda/include")
    return tuple(sorted({os.path.realpath(r) for r in roots if r}))


def flags_ok(flags: list[str]) -> bool:
    """Whether the server compiles with these flags exactly as the build would."""
    it = iter(flags)
    for flag in it:
        if flag in ("-isystem", "-I") or flag.startswith(("-isystem", "-I")):
            path = next(it, "") if flag in ("-isystem", "-I") else flag[len("-isystem" if flag.startswith("-isystem") else "-I"):]
            real = os.path.realpath(path) if os.path.isabs(path) else ""
            if not real or not any(real == r or real.startswith(r + os.sep) for r in trusted_include_roots()):
                return False
        elif flag in ("-D", "-U"):
            if not SAFE_FLAG.fullmatch(flag + next(it, "")):
                return False
        elif not SAFE_FLAG.fullmatch(flag):
            return False
    return True


def unit_key(name: str, flags: list[str], text: str, env: dict[str, str], device: str) -> str:
    cxx = os.environ.get("CXX", "c++")
    parts = [UNITS_FORMAT, cxx, compiler_identity(cxx), torch_version(), sys.version.split()[0], device,
             cuda_toolkit_version() if device == "cuda" else "", env.get("CPATH", ""), name, json.dumps(flags), text]
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:32]


class UnitCache:
    """The published units of a build cache (``<cache_root>/.units``) and their compiles."""

    def __init__(self, cache_root: str) -> None:
        self.root = os.path.join(cache_root, ".units")

    def prepare(self) -> bool:
        try:
            for sub in ("", ".building", ".locks", ".slots"):
                os.makedirs(os.path.join(self.root, sub), mode=0o700, exist_ok=True)
            os.chmod(self.root, 0o700)  # kernels never read it: the server sends the bytes
        except OSError:
            return False
        return True

    def lookup(self, key: str) -> tuple[bytes, list[str]] | None:
        try:
            obj = read_below(self.root, [key, "unit.o"], MAX_OBJECT_BYTES)
            deps = read_below(self.root, [key, "deps.json"], MAX_DEPS_BYTES)
        except (OSError, UnsafeFile):
            return None
        if obj is None or deps is None:
            return None
        self.touch(key)
        return obj, list(json.loads(deps))

    def touch(self, key: str) -> None:
        """The unit's last use (its lock file's time), which eviction goes by (evaluation.builds.cache_evict)."""
        with contextlib.suppress(OSError):
            fd = os.open(os.path.join(self.root, ".locks", key + ".lock"), os.O_CREAT | os.O_WRONLY | os.O_CLOEXEC,
                         0o600)
            try:
                os.utime(fd)
            finally:
                os.close(fd)

    @contextlib.contextmanager
    def locked(self, key: str, deadline: float, waits: HostWaits | None = None) -> Any:
        """The key's ``flock`` (yields False if it was not had by ``deadline``; a wait for it is counted
        in ``waits``); its holder's death frees it."""
        fd = os.open(os.path.join(self.root, ".locks", key + ".lock"), os.O_CREAT | os.O_RDWR | os.O_CLOEXEC, 0o600)
        try:
            yield _flock_any([fd], deadline, waits)
        finally:
            os.close(fd)

    @contextlib.contextmanager
    def compile_slot(self, deadline: float, waits: HostWaits | None = None) -> Any:
        """One of the host's ``host_compile_slots()`` (a ``flock`` on ``.slots/<n>.lock``, shared by
        every worker process of the host); yields False if none was free by ``deadline``."""
        fds = []
        try:
            for n in range(host_compile_slots()):
                fds.append(os.open(os.path.join(self.root, ".slots", f"{n}.lock"),
                                   os.O_CREAT | os.O_RDWR | os.O_CLOEXEC, 0o600))
            yield _flock_any(fds, deadline, waits)
        finally:
            for fd in fds:
                os.close(fd)

    def publish(self, key: str, obj: bytes, deps: list[str], meta: dict[str, Any]) -> None:
        """Under the key's lock: write in a private folder, then rename (whole or absent)."""
        building = os.path.join(self.root, ".building")
        private = os.path.join(building, f"{key}.{os.getpid()}.{secrets.token_hex(4)}")
        os.mkdir(private, 0o700)
        write_new(private, "unit.o", obj)
        write_new(private, "deps.json", json.dumps(deps).encode())
        write_new(private, "meta.json", json.dumps(meta).encode())
        try:
            os.rename(private, os.path.join(self.root, key))
        except OSError:
            _remove(private)  # published meanwhile (a lock-less race cannot happen; be safe)
        self.touch(key)

    def clear_dead(self, key: str) -> None:
        """Under the key's lock: what a compile killed midway left (its owner died: we hold its lock)."""
        building = os.path.join(self.root, ".building")
        for name in os.listdir(building):
            if name.startswith(key + "."):
                _remove(os.path.join(building, name))


class HostWaits:
    """Wall time during which a request of one build waited for the host (a key's lock another build
    held while compiling the same unit, a compile slot of the host), waits under way included (the
    build's deadline moves while it waits): the union of those waits (two requests waiting at once
    count once), at most ``cap_s``."""

    def __init__(self, cap_s: float) -> None:
        self.cap_s = cap_s
        self._spans: list[tuple[float, float]] = []
        self._open: dict[int, float] = {}
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def waiting(self) -> Any:
        start, token = time.monotonic(), secrets.randbits(64)
        with self._lock:
            self._open[token] = start
        try:
            yield
        finally:
            with self._lock:
                del self._open[token]
                self._spans.append((start, time.monotonic()))

    def seconds(self) -> float:
        now = time.monotonic()
        with self._lock:
            spans = sorted([*self._spans, *((start, now) for start in self._open.values())])
        total, reach = 0.0, float("-inf")
        for start, end in spans:
            if end > reach:
                total += end - max(start, reach)
                reach = end
        return min(total, self.cap_s)


def _flock_any(fds: list[int], deadline: float, waits: HostWaits | None = None) -> bool:
    """Whether one of ``fds`` was locked (held until it is closed) by ``deadline``; a wait (none was
    free at once) is counted in ``waits``."""
    if _try_flock(fds):
        return True
    with waits.waiting() if waits is not None else contextlib.nullcontext():
        while time.monotonic() < deadline:
            time.sleep(0.2)
            if _try_flock(fds):
                return True
    return False


def _try_flock(fds: list[int]) -> bool:
    for fd in fds:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except OSError:
            continue
    return False


class UnitServer:
    """The unit server of one build process: a listening socket in the build's sandbox folder, an
    accepting thread and at most ``MAX_CONNECTIONS_PER_BUILD`` request threads (a connection beyond
    is closed at once). ``stats``: what it did (``hit``, ``compiled``, ``fallback``, ``refused``
    connections, ``cpu_s``, ``peak_rss_mb``, ``killed``: compiles the limits ended)."""

    def __init__(self, cache: UnitCache, folder: str, env: dict[str, str], device: str, deadline: float,
                 sandbox_args: dict[str, Any], owner: int | None = None) -> None:
        self.cache = cache
        self.env = {k: v for k, v in env.items() if k not in ("CXX", "KB_UNIT_CXX", "KB_UNIT_PYTHON")}
        self.device = device
        self.deadline = deadline
        self.sandbox_args = sandbox_args
        self.path = os.path.join(folder, "units.sock")
        self.stats: dict[str, Any] = {"hit": 0, "compiled": 0, "fallback": 0, "refused": 0, "killed": 0,
                                      "cpu_s": 0.0, "peak_rss_mb": 0.0, "host_wait_s": 0.0}
        self.host_waits = HostWaits(HOST_WAIT_CAP * lock_wait_s())
        self._lock = threading.Lock()
        self._taken = 0  # compiles taken (running or done): at most MAX_COMPILES_PER_BUILD
        self._one_compile = threading.Lock()  # one compile of this build at a time
        self._slots = threading.BoundedSemaphore(MAX_CONNECTIONS_PER_BUILD)
        self._closed = threading.Event()
        self._procs: set[Any] = set()
        self._held_bytes = 0  # requests read and answers being sent, by the request threads
        self._threads: list[threading.Thread] = []
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.bind(self.path)
        os.chmod(self.path, 0o600)
        if owner is not None:
            os.chown(self.path, owner, owner)
        self._sock.listen(MAX_CONNECTIONS_PER_BUILD)
        self._accept = threading.Thread(target=self._serve, name="kb-unit-server", daemon=True)
        self._accept.start()

    def due(self) -> float:
        """The build's deadline: the one it was given, moved by the time its requests waited for the host."""
        return self.deadline + self.host_waits.seconds()

    def client_env(self) -> dict[str, str]:
        """The client waits for an answer as long as the build may last, waits for the host included."""
        left = self.deadline - time.monotonic() + self.host_waits.cap_s
        return {"KB_UNIT_SOCKET": self.path, "KB_UNIT_TIMEOUT_S": str(max(1, int(left)))}

    def _count(self, what: str, cpu_s: float = 0.0, rss_mb: float = 0.0) -> None:
        with self._lock:
            self.stats[what] += 1
            self.stats["cpu_s"] = round(self.stats["cpu_s"] + cpu_s, 3)
            self.stats["peak_rss_mb"] = max(self.stats["peak_rss_mb"], round(rss_mb, 1))

    def _serve(self) -> None:
        while not self._closed.is_set():
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            if not self._slots.acquire(blocking=False):
                conn.close()  # the client compiles in its build
                self._count("refused")
                continue
            if not _ALL_CONNECTIONS.acquire(blocking=False):
                self._slots.release()
                conn.close()
                self._count("refused")
                continue
            self._threads = [t for t in self._threads if t.is_alive()]
            t = threading.Thread(target=self._handle, args=(conn,), name="kb-unit-request", daemon=True)
            self._threads.append(t)
            t.start()

    def _handle(self, conn: socket.socket) -> None:
        try:
            with conn:
                self._handle_one(conn)
        finally:
            _ALL_CONNECTIONS.release()
            self._slots.release()

    def charged(self) -> tuple[list[int], int, int]:
        """What this server does for its build, to count as the build's own: its live compilers (their
        trees), its threads, and the kB its request threads hold (requests read, answers being sent)."""
        with self._lock:
            held_kb = self._held_bytes // 1024
        threads = sum(t.is_alive() for t in [self._accept, *self._threads])
        return [p.pid for p in list(self._procs)], threads, held_kb

    def _hold(self, nbytes: int) -> None:
        with self._lock:
            self._held_bytes += nbytes

    def _handle_one(self, conn: socket.socket) -> None:
        held = 0
        try:
            req, held = _read_request(conn, time.monotonic() + REQUEST_READ_S)
            self._hold(held)
            answer = self.answer(req) if isinstance(req, dict) else None
        except (OSError, ValueError, struct.error, TypeError, AttributeError):
            answer = None
        head: dict[str, Any] = {"ok": False}
        data = b""
        if answer is None:
            self._count("fallback")
        else:
            head, data = {"ok": True, "size": len(answer[0]), "deps": answer[1]}, answer[0]
        self._hold(len(data))
        body = json.dumps(head).encode()
        conn.settimeout(60)  # a client that never reads holds no thread for long
        try:
            with contextlib.suppress(OSError):
                conn.sendall(struct.pack(">I", len(body)) + body + data)
        finally:
            self._hold(-held - len(data))

    def _take_compile(self) -> bool:
        """Count a compile before it runs (check and count in one step)."""
        with self._lock:
            if self._taken >= MAX_COMPILES_PER_BUILD:
                return False
            self._taken += 1
            return True

    def _give_back_compile(self) -> None:
        with self._lock:
            self._taken -= 1

    def answer(self, req: dict[str, Any]) -> tuple[bytes, list[str]] | None:
        """The object and dependencies of the unit ``req`` names, served or compiled; None: compile it in the build."""
        name, flags, text = req.get("name"), req.get("flags"), req.get("text")
        if not (isinstance(name, str) and NAME.fullmatch(name) and isinstance(text, str)
                and isinstance(flags, list) and all(isinstance(f, str) for f in flags) and flags_ok(flags)
                and not server_refuses(text.encode("utf-8", "surrogatepass"))):
            return None
        # Keyed without the module's name where only the name differs (evaluation.builds.unit_names): the
        # first build compiles under its own name, later ones get that object renamed.
        keyed = shared_flags(flags, text)
        key = unit_key(name, keyed, text, self.env, self.device)
        found = self.cache.lookup(key)
        if found is not None:
            self._count("hit")
            return _named(found, flags) if keyed != flags else found
        if not self._take_compile():
            return None
        compiled = False
        # Not bounded by the build's deadline: waits for the host move it (``due``).
        wait_until = time.monotonic() + lock_wait_s()
        try:
            if not self._one_compile.acquire(timeout=max(0.0, wait_until - time.monotonic())):
                return None
            try:
                found, compiled = self._locked_compile(key, name, flags, text, wait_until)
            finally:
                self._one_compile.release()
            return _named(found, flags) if keyed != flags else found
        finally:
            if not compiled:
                self._give_back_compile()

    def _locked_compile(self, key: str, name: str, flags: list[str], text: str,
                        wait_until: float) -> tuple[tuple[bytes, list[str]] | None, bool]:
        """Under the key's lock (waited for until ``wait_until``) and a compile slot of the host: the
        unit served if another build compiled it meanwhile, else compiled; (answer, compiled or tried)."""
        with self.cache.locked(key, wait_until, self.host_waits) as held:
            if not held or self._closed.is_set():
                return None, False
            found = self.cache.lookup(key)  # compiled by whoever held the lock before us
            if found is not None:
                self._count("hit")
                return found, False
            with self.cache.compile_slot(wait_until, self.host_waits) as slot:
                if not slot or self._closed.is_set():
                    return None, False
                self.cache.clear_dead(key)
                built = self._compile(name, flags, text)
            if built is None:
                return None, True
            obj, deps, meta = built
            self.cache.publish(key, obj, deps, meta)
            self._count("compiled", meta["cpu_s"], meta["peak_rss_mb"])
            return (obj, deps), True

    def _sandbox(self) -> Any:
        """A fresh sandbox for one compile, with the build's limits (its object and temporary files
        need no more than a few times ``MAX_OBJECT_BYTES``: so each file is capped there)."""
        from evaluation.sandbox.sandbox import Sandbox  # deferred: sandbox imports this module's users

        args = dict(self.sandbox_args)
        cap_mb = 4 * MAX_OBJECT_BYTES // 2**20
        args["file_size_limit_mb"] = min(args.get("file_size_limit_mb") or cap_mb, cap_mb)
        cpath = [p for p in self.env.get("CPATH", "").split(os.pathsep) if p]
        return Sandbox(device="cpu", extra_env=self.env, expose=tuple(cpath), **args)

    def _compile(self, name: str, flags: list[str], text: str) -> tuple[bytes, list[str], dict[str, Any]] | None:
        """The unit compiled in a fresh sandbox of the server's own (its own uid and empty folder),
        watched like a build (``_wait``: the build's memory and task limits)."""
        import subprocess  # deferred: a miss only

        sandbox = self._sandbox()
        try:
            argv = [*shlex.split(os.environ.get("CXX", "c++")), *flags, "-MMD", "-MF", "unit.d", "-c", name,
                    "-o", "unit.o"]
            cmd, env, workdir = sandbox.command("unit", argv)
            write_new(workdir, name, text.encode("utf-8"))
            t0 = time.monotonic()
            with open(os.path.join(sandbox.root, "unit.log"), "wb") as log:
                proc = subprocess.Popen(cmd, env=env, cwd=workdir, stdin=subprocess.DEVNULL, stdout=log,
                                        stderr=subprocess.STDOUT, start_new_session=True, close_fds=True,
                                        preexec_fn=_die_with_parent)
            self._procs.add(proc)
            try:
                code, cpu_s, rss_mb = _wait(proc, self.due, self._closed, self._limits(), self._count)
            finally:
                self._procs.discard(proc)
            obj = read_below(workdir, ["unit.o"], MAX_OBJECT_BYTES) if code == 0 else None
            depfile = read_below(workdir, ["unit.d"], MAX_DEPS_BYTES) if code == 0 else None
            if obj is None or depfile is None:
                return None
            meta = {"seconds": round(time.monotonic() - t0, 3), "cpu_s": round(cpu_s, 3),
                    "peak_rss_mb": round(rss_mb, 1), "name": name, "flags": flags, "at": time.time()}
            return obj, parse_deps(depfile.decode("utf-8", "replace"), name), meta
        except (OSError, UnsafeFile):
            return None
        finally:
            sandbox.close()

    def _limits(self) -> tuple[int, int]:
        """(memory in MB, tasks) a compile's tree may hold: the build's."""
        return int(self.sandbox_args.get("memory_limit_mb") or 4096), int(
            self.sandbox_args.get("max_processes") or DEFAULT_MAX_PROCESSES)

    def close(self) -> None:
        """Stop serving: no new request, running compiles killed, every thread joined."""
        self._closed.set()
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)
        self._sock.close()
        for proc in list(self._procs):
            with contextlib.suppress(OSError):
                os.killpg(proc.pid, signal.SIGKILL)
        self._accept.join(timeout=10)
        for t in self._threads:
            t.join(timeout=30)
        self.stats["host_wait_s"] = round(self.host_waits.seconds(), 3)


def _named(found: tuple[bytes, list[str]] | None, flags: list[str]) -> tuple[bytes, list[str]] | None:
    """A shared unit's object under the module name ``flags`` give (``evaluation.builds.unit_names``);
    None when it cannot be renamed (the build compiles it)."""
    if found is None:
        return None
    obj = bind_name(found[0], module_name(flags))
    return None if obj is None else (obj, found[1])


def _read_request(conn: socket.socket, deadline: float) -> tuple[Any, int]:
    """A length-prefixed JSON request, read whole by ``deadline`` into at most ``MAX_REQUEST_BYTES``,
    and its length."""
    def read(n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            left = deadline - time.monotonic()
            if left <= 0:
                raise ValueError("the request came too slowly")
            conn.settimeout(left)
            chunk = conn.recv(min(1 << 16, n - len(buf)))
            if not chunk:
                raise ValueError("the request ended early")
            buf += chunk
        return bytes(buf)

    (n,) = struct.unpack(">I", read(4))
    if n > MAX_REQUEST_BYTES:
        raise ValueError("request too large")
    return json.loads(read(n)), n


def _wait(proc: Any, deadline: Callable[[], float], closed: threading.Event, limits: tuple[int, int],
          count: Any) -> tuple[int | None, float, float]:
    """Exit code, CPU seconds and peak memory in MB (of the process and the compilers it reaped: the
    largest one's) of ``proc``; killed (None) past ``deadline()``, when the server closes, or when its
    tree holds more than ``limits`` (memory in MB, proportional as a build's watchdog counts it; tasks)."""
    from evaluation.sandbox.process import process_tree  # deferred: sandbox imports this module's users

    meter = MemoryMeter(limits[0])
    next_check = 0.0
    while True:
        pid, status, ru = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            proc.returncode = os.waitstatus_to_exitcode(status)
            return proc.returncode, ru.ru_utime + ru.ru_stime, ru.ru_maxrss / 1024
        over = False
        if time.monotonic() >= next_check:
            next_check = time.monotonic() + 0.1
            children, threads = process_table()
            pids = process_tree(proc.pid, children)
            over = sum(threads.get(p, 1) for p in pids) > limits[1] or meter.over_limit(pids)[0]
            if over:
                count("killed")
        if over or time.monotonic() >= deadline() or closed.is_set():
            with contextlib.suppress(OSError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            return None, 0.0, 0.0
        time.sleep(0.05)


def parse_deps(depfile: str, name: str) -> list[str]:
    """The absolute paths a compile's dependency file lists (``-MMD``: headers outside the system
    folders, the precompiled header), less the unit itself."""
    text = depfile.replace("\\\n", " ")
    _, _, rest = text.partition(": ")
    deps, word = [], ""
    i = 0
    while i < len(rest):
        c = rest[i]
        if c == "\\" and i + 1 < len(rest) and rest[i + 1] in " #\\":
            word += rest[i + 1]
            i += 2
            continue
        if c.isspace():
            if word:
                deps.append(word)
            word = ""
        else:
            word += c
        i += 1
    if word:
        deps.append(word)
    return [d for d in deps if d != name and os.path.isabs(d)]


def merge_stats(total: dict[str, Any], more: dict[str, Any]) -> None:
    """Add one unit server's ``stats`` to a build's (a slim-then-full build has two): counts and CPU
    seconds add up; the peak memory is the larger of the two."""
    for key, value in more.items():
        merged = max(total.get(key, 0), value) if key == "peak_rss_mb" else total.get(key, 0) + value
        total[key] = round(merged, 3)


def serve(cache_root: str, folder: str, env: dict[str, str], device: str, deadline: float,
          sandbox_args: dict[str, Any], owner: int | None = None) -> UnitServer | None:
    """A unit server for one build (None when off or it cannot start: the build compiles itself)."""
    if not enabled() or len(os.path.join(folder, "units.sock")) > 100:
        return None
    cache = UnitCache(cache_root)
    if not cache.prepare():
        return None
    try:
        return UnitServer(cache, folder, env, device, deadline, sandbox_args, owner)
    except OSError:
        return None
