"""The build stage: compile a kernel off the GPU, in its own sandboxed process, into the build cache.

``prebuild(kernel_source, config)`` imports the kernel module in a sandboxed ``build`` process (the
same isolation as the kernel process: scrubbed environment, its own uid, time and memory limits, no
network) with no GPU visible and ``TORCH_CUDA_ARCH_LIST`` set to the target architecture, so that
``load_inline`` compiles; the result is published into the cache (``evaluation.builds.entry``). The GPU
phase of the evaluation then only loads the built module. ``BuildPool`` runs builds side by side in
a pool of such processes, ahead of the GPUs (the sweep and the site's workers use it).

The host's own work is never the kernel's time: waiting for the entry's lock and for the host's
precompiled headers comes before the build's deadline starts, the unit server's waits for another
build's compile of the same unit or for a compile slot move it (``BuildOutcome.host_s``), a compile error that names the
headers' folder is built again without them (the verdict is that build's), and a build that times
out while the host was building headers or was loaded beyond its cores ends ``infrastructure_error``
(no verdict; retried), never ``timeout``.

A compiler failure is recorded in the cache entry (``compile_error`` with the compiler's message, at
once, for every later evaluation of that source); a module that fails at import for another reason
(say it touches the GPU at import) is published if something was built, and the GPU phase does the
rest.
"""

from __future__ import annotations

import functools
import os
import stat
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from evaluation.builds.cu_flags import nvcc_append_flags
from evaluation.builds.entry import MAX_READ_BYTES, BuildDir, needs_build
from evaluation.builds.nvcc_steps import build_env as split_nvcc_env
from evaluation.builds.pch import HeaderCache, lock_held
from evaluation.builds.pch import enabled as pch_enabled
from evaluation.builds.pool import BuildUsage, PoolSizer, measure_tree
from evaluation.builds.slim_headers import enabled as slim_wanted
from evaluation.builds.slim_headers import ensure as slim_folder
from evaluation.builds.slim_headers import level as slim_level
from evaluation.builds.units import compiler_env
from evaluation.builds.units import merge_stats as merge_unit_stats
from evaluation.builds.units import serve as unit_server
from evaluation.phases.sizes_ahead import find_sizes
from evaluation.results.types import EvaluationConfig
from evaluation.sandbox.host_errors import BUSY_BUILD, INFRASTRUCTURE_ERROR, KILLED_BUILD, killed_build
from evaluation.sandbox.process import ChildError, Deadline
from evaluation.sandbox.protocol import BuildRequest
from evaluation.sandbox.safe_files import (
    UnsafeFile,
    open_checked,
    open_dir_below,
    read_below,
    subdirectories,
    walk_tree,
)

#: Statuses of a build: nothing to build, found in the cache (built, or a recorded compiler error),
from evaluation.sandbox.sandbox import Sandbox

#: built now, the compiler failed, left to the GPU phase, or the build process timed out / crashed.
#: ``infrastructure_error``: the build was killed from outside (evaluation.sandbox.host_errors.killed_build):
#: nothing is cached, and the evaluation is retried.
BUILD_STATUSES = ("not_needed", "cached", "built", "compile_error", "deferred", "timeout", "crashed",
                  INFRASTRUCTURE_ERROR)


@dataclass
class BuildOutcome:
    status: str
    seconds: float = 0.0  # wall time of the build process (0 when nothing was built)
    error: str | None = None
    log: str = ""
    steps_s: dict[str, float] = field(default_factory=dict)  # ninja's own record: seconds per output
    started: float = 0.0  # time.monotonic() when the build began (after the lock)
    finished: float = 0.0
    #: The precompiled torch headers: "shared" (found published), "built" (made while this build
    #: waited for them), "lean" (none: the lean folder, evaluation.builds.slim_headers, for the ``.cu``
    #: and the wrapper both), "none" (``headers_why`` says why: off, their build failed, not ready
    #: after the wait, or a compile through them failed and the source was built again without them).
    headers: str = ""
    headers_why: str = ""
    headers_s: float = 0.0  # waiting for / building the headers (before ``started``: not the kernel's time)
    #: What the ``.cu`` file's torch headers were (evaluation.builds.slim_headers): "lean", "slim", "full"
    #: (off, or the lean or slim build failed and the source was built again), "" (no CUDA build).
    cu_headers: str = ""
    usage: BuildUsage | None = None  # CPU seconds and peak memory of the build process tree
    #: What the unit server (evaluation.builds.units) did for the build: units served from the unit cache
    #: ("hit"), compiled by the server ("compiled"; "cpu_s" and "peak_rss_mb": its compilers' CPU
    #: seconds and largest resident memory, added to ``usage``), or left to the build ("fallback");
    #: empty when it is off.
    units: dict[str, Any] = field(default_factory=dict)

    @property
    def host_s(self) -> float:
        """Seconds of the build that were the host's, not the kernel's: waiting for its headers, and
        the unit server's waits for other builds' compiles of the same unit and for compile slots."""
        return self.headers_s + float(self.units.get("host_wait_s", 0.0))

    def to_dict(self) -> dict[str, Any]:
        out = {"status": self.status, "seconds": round(self.seconds, 3), "error": self.error,
               "steps_s": self.steps_s, "headers": self.headers, "headers_why": self.headers_why,
               "headers_s": round(self.headers_s, 3),
               "cu_headers": self.cu_headers, "units": self.units}
        if self.usage is not None:
            out.update(cpu_s=round(self.usage.cpu_s, 2), peak_rss_mb=round(self.usage.peak_rss_mb, 1))
        return out


def default_build_workers(gpus: int = 1) -> int:
    """Build processes for a host: $KB_BUILD_WORKERS (what ``python -m evaluation sweep`` reads when
    no --build-workers is given), else the cores left after one timing core and one worker core per
    GPU, two per build (a load_inline build compiles two files at once). Without either, the sweep
    and the site's builder size their pools by what builds use (``build_pool.PoolSizer``)."""
    env = os.environ.get("KB_BUILD_WORKERS")
    if env:
        return max(1, int(env))
    cores = len(os.sched_getaffinity(0))
    return max(1, (cores - 2 * gpus) // 2)


@functools.lru_cache(maxsize=1)
def _probed_arch() -> str:
    from evaluation.results.hardware import probe_hardware  # deferred: only when no architecture was named

    return str(probe_hardware("cuda").get("capability") or "")


def target_arch(cfg: EvaluationConfig) -> str:
    """The architecture CUDA kernels are built for: the config's, $TORCH_CUDA_ARCH_LIST, else the GPU's."""
    if cfg.device != "cuda":
        return ""
    return cfg.cuda_arch or os.environ.get("TORCH_CUDA_ARCH_LIST") or _probed_arch()


def arch_env(cfg: EvaluationConfig) -> dict[str, str]:
    """What every process touching the build cache must agree on (else ninja sees other flags and rebuilds)."""
    arch = target_arch(cfg)
    return {"TORCH_CUDA_ARCH_LIST": arch} if arch else {}


def header_cache_for(cfg: EvaluationConfig) -> HeaderCache:
    """The host's precompiled torch headers for builds under ``cfg`` (``evaluation.builds.pch``)."""
    return HeaderCache(cfg.build_cache_dir, cfg.device, target_arch(cfg), cfg.hide_paths)


def build_env(cfg: EvaluationConfig, slim_cu: bool = False, headers: bool = True) -> dict[str, str]:
    """The environment build and kernel processes get: the architecture, and the precompiled headers
    where they are published (``CPATH`` is not in ninja's commands: with or without it, a build
    stays up to date); ``slim_cu``: and, after them, the ``.cu`` files' ``torch/extension.h``
    (evaluation.builds.slim_headers; the build stage's first try only); the unit server's compiler shim
    as ``CXX`` when units are on (evaluation.builds.units: the same for both, so ninja's commands are); the
    ``.cu`` host side's level where one is set (evaluation.builds.cu_flags) and nvcc's steps side by side
    where on (evaluation.builds.nvcc_steps); ``headers`` False: without the precompiled headers (a build
    they failed)."""
    env = {**arch_env(cfg), **(header_cache_for(cfg).env() if headers else {}), **compiler_env()}
    nvcc_flags = nvcc_append_flags(cfg.device)
    if nvcc_flags:
        env["NVCC_APPEND_FLAGS"] = nvcc_flags
    env.update(split_nvcc_env(cfg.device))
    slim = slim_folder(cfg.build_cache_dir) if slim_cu else None
    if slim:
        env["CPATH"] = os.pathsep.join(p for p in (env.get("CPATH"), slim) if p)
    return env


#: Seconds a build waits for headers being made: a header build and its proof took about 520 s on a
#: host at load 16 (two compilers of ~100 s CPU each, then two proof compiles), 2-4 minutes here.
HEADER_WAIT_S = 600.0


def header_wait_s() -> float:
    """How long a build waits for the host's headers while they are being made: $KB_PCH_WAIT_S, else
    ``HEADER_WAIT_S``. The wait is the host's time, never the kernel's (its deadline starts after),
    so a build does not go without headers only because they are being made; it is bounded so that
    an evaluation (lock wait + this + its own budget) stays under a worker's job limit."""
    return float(os.environ.get("KB_PCH_WAIT_S", HEADER_WAIT_S))


def lean_first(cfg: EvaluationConfig) -> bool:
    """A CUDA build tried first with the lean folder alone (evaluation.builds.slim_headers): its ``.cu``
    and its wrapper both get the lean ``torch/extension.h``, and no precompiled header, which is
    torch's whole header and would stand in for the lean one in the wrapper."""
    return slim_wanted(cfg.device) and slim_level() == "lean"


def _prepare_headers(cfg: EvaluationConfig, out: BuildOutcome, wait_s: float | None = None) -> None:
    """Have the host's headers made if nobody has (once per key) and wait for them ``wait_s`` at most
    (``header_wait_s()``); ``out`` says which headers the build uses, and why none when it uses none."""
    if not pch_enabled():
        out.headers, out.headers_why = "none", "off (KB_PCH=0)"
        return
    t0 = time.monotonic()
    headers = header_cache_for(cfg)
    if headers.ready:
        out.headers = "shared"
        return
    ok = headers.ensure(wait_s=header_wait_s() if wait_s is None else wait_s)
    out.headers_s += time.monotonic() - t0
    if ok:
        out.headers = "built"
        return
    failure = headers.failure()
    out.headers = "none"
    if failure:
        out.headers_why = f"the header build failed: {failure}"
    elif wait_s == 0:
        out.headers_why = "not made yet (asked for, for later builds)"
    else:
        out.headers_why = f"not ready after waiting {time.monotonic() - t0:.0f} s"


def host_busy(cfg: EvaluationConfig) -> str:
    """Evidence that the host's own work slowed a build, not the kernel: a header build running now
    (any key's lock held), or the host loaded beyond its cores (1-minute load average above
    ``KB_BUILD_LOADED_FACTOR``, 1.5, times its cores). "" when there is none."""
    locks = os.path.join(cfg.build_cache_dir, ".pch", ".locks")
    try:
        names = os.listdir(locks)
    except OSError:
        names = []
    if any(lock_held(os.path.join(locks, n)) for n in names):
        return "the host was building its shared headers"
    cores, load = os.cpu_count() or 1, os.getloadavg()[0]
    if load > float(os.environ.get("KB_BUILD_LOADED_FACTOR", "1.5")) * cores:
        return f"the host was loaded (load average {load:.1f} on {cores} cores)"
    return ""


def build_dir_for(kernel_source: str, cfg: EvaluationConfig) -> BuildDir:
    build = BuildDir(cfg.build_cache_dir, kernel_source, cfg.device, target_arch(cfg))
    build.max_bytes = cfg.build_entry_max_mb * 2**20
    return build


def prebuild(kernel_source: str, cfg: EvaluationConfig, wait: bool = True) -> BuildOutcome:
    """Build ``kernel_source`` into the cache unless it is there; ``wait`` False: give up at once
    (status ``deferred``) if another process holds the entry."""
    if not needs_build(kernel_source):
        return BuildOutcome("not_needed")
    build = build_dir_for(kernel_source, cfg)
    if not build.lock(time.monotonic() + cfg.timeout_s, wait=wait):
        return BuildOutcome("deferred", error="the cache entry is busy or unusable")
    try:  # the wait for the lock was another build's time: the budget starts now
        return build_locked(build, kernel_source, cfg, time.monotonic() + cfg.timeout_s)
    finally:
        build.unlock()


def build_locked(build: BuildDir, kernel_source: str, cfg: EvaluationConfig, deadline: float) -> BuildOutcome:
    """Under the entry's lock: the cached outcome, or a build in a private folder, then published.
    ``deadline`` is the kernel's; the wait for the host's headers is added to it."""
    failure = recorded_failure(build)
    if failure is not None:
        return BuildOutcome("compile_error", error=failure.get("error"), log=failure.get("log", ""))
    if build.built:
        return BuildOutcome("cached")
    out = BuildOutcome("deferred")
    if not lean_first(cfg):  # a lean build needs no precompiled headers (its wrapper's are lean too)
        _prepare_headers(cfg, out)
    deadline += out.headers_s  # the host's work, not the kernel's time
    if build.begin() is None:
        return BuildOutcome("deferred", error="the build cache is unusable")
    out.started = time.monotonic()
    try:
        reply = _build_slim_then_full(build, kernel_source, cfg, deadline, out)
        reply = _without_headers_if_they_failed(build, kernel_source, cfg, deadline, out, reply)
    finally:
        out.finished = time.monotonic()
        out.seconds = out.finished - out.started
    out.steps_s = ninja_steps(build.private or "")
    _conclude(build, cfg, out, reply)
    return out


def _conclude(build: BuildDir, cfg: EvaluationConfig, out: BuildOutcome, reply: dict[str, Any]) -> None:
    """Publish the build, record its compiler error, or drop it; what is the host's is never cached."""
    host = killed_build(f"{out.error or ''}\n{out.log}") or reply.get("host")
    if not host and reply.get("kind") == INFRASTRUCTURE_ERROR:
        host = f"{KILLED_BUILD}: {out.error}"
    if not host and out.status == "timeout":
        busy = host_busy(cfg)
        host = f"{BUSY_BUILD} {busy}: {out.error}" if busy else ""
    if host:  # never cached: built again next time
        out.status, out.error = INFRASTRUCTURE_ERROR, f"{host} (no verdict: built again next time)"
        build.abandon()
    elif reply.get("ok"):
        out.status = "built"
        build.publish()
    elif reply.get("kind") == "compile_error":
        out.status, out.error = "compile_error", reply.get("error")
        build.publish({"error": out.error or "", "log": out.log})
    elif reply.get("kind") == "deferred" and _has_library(build.private or ""):
        build.publish()  # what was compiled is kept; the GPU phase imports the module again
    else:
        build.abandon()


def _without_headers_if_they_failed(build: BuildDir, kernel_source: str, cfg: EvaluationConfig, deadline: float,
                                    out: BuildOutcome, reply: dict[str, Any]) -> dict[str, Any]:
    """A compile error that names the precompiled headers' folder is the host's, never the kernel's:
    the source is built again, in a fresh folder, without them, and that build's outcome stands."""
    folder = header_cache_for(cfg).path
    text = f"{out.error or ''}\n{out.log}"
    if reply.get("kind") != "compile_error" or out.headers not in ("shared", "built") or folder not in text:
        return reply
    line = next((ln.strip() for ln in text.splitlines() if folder in ln), "")
    out.headers, out.headers_why = "none", f"a compile through them failed, built again without them: {line[:300]}"
    build.abandon()
    if build.begin() is None:
        return {"kind": INFRASTRUCTURE_ERROR, "host": "the build cache is unusable"}
    out.error, out.log = None, ""
    # The slim try again only if it was not the one that failed (a full build names the folder).
    return _build_slim_then_full(build, kernel_source, cfg, deadline, out, slim_first=out.cu_headers != "full")


def _build_slim_then_full(build: BuildDir, kernel_source: str, cfg: EvaluationConfig, deadline: float,
                          out: BuildOutcome, slim_first: bool = True) -> dict[str, Any]:
    """A CUDA source is built with the lean or slim torch headers first; one that does not compile so
    is built again, in a fresh folder, with the real header (its own compiler error, if any, is then
    the one recorded) and the precompiled headers if they are made (a lean try waited for none)."""
    slim = slim_first and slim_wanted(cfg.device) and slim_folder(cfg.build_cache_dir) is not None
    lean = slim and lean_first(cfg)
    if lean:
        out.headers, out.headers_why = "lean", ""
    elif not out.headers:  # a lean build whose folder could not be written: the precompiled ones if made
        _prepare_headers(cfg, out, wait_s=0.0)
    out.cu_headers = slim_level() if slim else ("full" if cfg.device == "cuda" else "")
    reply = _run_build_process(build, kernel_source, cfg, deadline, out, slim_cu=slim)
    if not (slim and reply.get("kind") == "compile_error"):
        return reply
    build.abandon()
    if build.begin() is None:
        return reply
    if lean:  # not waited for: a build without them takes less than their making
        _prepare_headers(cfg, out, wait_s=0.0)
    out.cu_headers, out.error, out.log = "full", None, ""
    return _run_build_process(build, kernel_source, cfg, deadline, out, slim_cu=False)


def recorded_failure(build: BuildDir) -> dict[str, str] | None:
    """Under the lock: the compiler error recorded for the entry. One that records a killed build,
    or names the host's precompiled headers (cached by releases that took them for the kernel's),
    is dropped, and the source built again."""
    failure = build.failure
    text = f"{failure.get('error', '')}\n{failure.get('log', '')}" if failure is not None else ""
    if failure is not None and (killed_build(text) or os.path.join(build.root, ".pch") + os.sep in text):
        build.drop()
        return None
    return failure


def process_env(cfg: EvaluationConfig, out: BuildOutcome, slim_cu: bool) -> dict[str, str]:
    """The build process's environment: the precompiled headers only where ``out`` says it uses them."""
    return {**build_env(cfg, slim_cu, headers=out.headers in ("shared", "built")), "CUDA_VISIBLE_DEVICES": ""}


def _run_build_process(build: BuildDir, kernel_source: str, cfg: EvaluationConfig, deadline: float,
                       out: BuildOutcome, slim_cu: bool = False) -> dict[str, Any]:
    env = process_env(cfg, out, slim_cu)
    limits = _sandbox_limits(cfg)
    sandbox = Sandbox(device="cpu", build_dir=build.path, disable=cfg.disable_defences, extra_env=env, **limits)
    reply: dict[str, Any] = {}
    units = None
    try:
        if sandbox.switch_uid:
            build.give_to(sandbox.uids["build"])
        units = unit_server(cfg.build_cache_dir, sandbox.root, env, cfg.device, deadline, limits,
                            sandbox.uids["build"] if sandbox.switch_uid else None)
        if units is not None:
            sandbox.extra_env.update(units.client_env())
        proc = sandbox.spawn("build", "", sandbox.write_source("kernel.py", kernel_source))
        if units is not None:  # what its server does for it is the build's own (tasks, memory)
            proc.charged = units.charged
        # An earlier try's waits for the host count too (a slim-then-full build is two tries).
        base = deadline + out.units.get("host_wait_s", 0.0)
        due: Deadline = (lambda: base + units.host_waits.seconds()) if units is not None else base
        ready = proc.recv(due)
        reply = proc.request(BuildRequest(), due) if ready.get("ok") else ready
        out.usage = measure_tree(proc)
        out.error = reply.get("error") or None
        out.log = (reply.get("traceback") or "") + proc.read_log()
    except ChildError as exc:
        out.status, out.error = exc.kind, f"build process: {exc.message}"
        out.log = "".join(p.read_log() for p in sandbox.procs)
    finally:
        if units is not None:
            units.close()
            merge_unit_stats(out.units, units.stats)  # both tries of a slim-then-full build
            if out.usage is not None:  # the server's compiles were the build's work too (the build waits on them)
                out.usage.cpu_s += units.stats["cpu_s"]
                # The build's watchdog counted the live compilers in its peak already (``charged``).
                out.usage.peak_rss_mb = max(out.usage.peak_rss_mb, units.stats["peak_rss_mb"])
        try:
            sandbox.close()
        finally:  # the build folder comes back to root whatever closing raised
            if sandbox.switch_uid:
                build.give_to(0)
    return reply


def _sandbox_limits(cfg: EvaluationConfig) -> dict[str, Any]:
    """The limits of a build's sandboxes: its build process's, and the unit server's compiles'."""
    return {"size_scale": cfg.size_scale, "memory_limit_mb": cfg.memory_limit_mb, "hide_paths": cfg.hide_paths,
            "isolation": cfg.isolation, "max_processes": cfg.max_processes,
            "file_size_limit_mb": cfg.file_size_limit_mb}


def _has_library(private: str) -> bool:
    """Whether the build left a shared library (a regular ``*.so``) in ``torch_extensions``, walked by
    descriptors (the build's processes wrote it: no link followed, no recursion, ``MAX_DEPTH``)."""
    found: list[str] = []

    def visit(dir_fd: int, name: str, st: os.stat_result) -> int | None:
        if stat.S_ISREG(st.st_mode) and name.endswith(".so"):
            found.append(name)
        return open_checked(dir_fd, name, st) if stat.S_ISDIR(st.st_mode) and not found else None

    try:
        fd = open_dir_below(private, ["torch_extensions"])
    except (OSError, UnsafeFile):
        return False
    try:
        walk_tree(fd, visit)
    finally:
        os.close(fd)
    return bool(found)


def ninja_steps(entry: str) -> dict[str, float]:
    """Seconds per output of the builds in an entry, from ninja's own log (``.ninja_log``: start and
    end in ms per output): where a build's time went (the C++ wrapper, the .cu file, the link)."""
    steps: dict[str, float] = {}
    # What a kernel's build left is hostile: no link followed, no FIFO opened (evaluation.sandbox.safe_files).
    for name in subdirectories(entry, ["torch_extensions"]) if entry else []:
        raw = read_below(entry, ["torch_extensions", name, ".ninja_log"], MAX_READ_BYTES)
        for line in (raw or b"").decode("utf-8", "replace").splitlines():
            parts = line.split("\t")
            if len(parts) >= 4 and parts[0].isdigit() and parts[1].isdigit():
                steps[f"{name}/{parts[3]}"] = (int(parts[1]) - int(parts[0])) / 1000.0
    return steps


class BuildPool:
    """Builds side by side in sandboxed build processes (one thread drives each), on ``cpus``.

    ``workers`` builds at once; None: as many as the build cores and the host's memory (their
    ``share``-th part) hold at what the recent builds used (``evaluation.builds.pool.PoolSizer``,
    re-estimated after every build).
    ``submit(source)`` returns a future of the ``BuildOutcome``; sources are built in the order
    submitted, so a pool fed the GPU queue's order builds N+1 ... N+k while the GPUs evaluate N.
    The same source submitted twice is built once.
    """

    def __init__(self, workers: int | None, cfg: EvaluationConfig, cpus: list[int] | None = None,
                 share: int = 1) -> None:
        cores = len(cpus) if cpus else len(os.sched_getaffinity(0))
        self.sizer = PoolSizer(cores, workers, share=share)  # share: one of that many pools on ``cpus``
        self.workers = max(1, workers) if workers else cores  # threads; the sizer admits ``limit`` at a time
        self.cfg = cfg
        # Build processes inherit their thread's CPU mask and niceness: off the cores timed processes
        # use, and behind the GPU workers' own processes on the cores they share.
        if pch_enabled() and not lean_first(cfg):  # the host's headers, made before the first build needs them
            header_cache_for(cfg).ensure(wait_s=0.0)
        self._pool = ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="kb-build",
                                        initializer=_build_thread, initargs=(cpus,))
        self._futures: dict[str, Future[BuildOutcome]] = {}
        self._sizes: dict[str, Future[str]] = {}
        self._lock = threading.Lock()

    def submit(self, kernel_source: str, cfg: EvaluationConfig | None = None) -> Future[BuildOutcome]:
        """Build ``kernel_source`` (under ``cfg``, else the pool's) unless it was submitted before."""
        with self._lock:
            fut = self._futures.get(kernel_source)
            if fut is None:
                fut = self._pool.submit(self._admitted_build, kernel_source, cfg or self.cfg)
                self._futures[kernel_source] = fut
            return fut

    def find_sizes(self, problem_source: str, cfg: EvaluationConfig | None = None) -> Future[str]:
        """Find the problem's sizes ahead of its evaluation (``evaluation.phases.sizes_ahead``) on one
        of the pool's threads, once per problem and configuration."""
        cfg = cfg or self.cfg
        key = f"sizes\0{cfg.size_scale}\0{cfg.build_cache_dir}\0{problem_source}"
        with self._lock:
            fut = self._sizes.get(key)
            if fut is None:
                fut = self._pool.submit(find_sizes, problem_source, cfg)
                self._sizes[key] = fut
            return fut

    def _admitted_build(self, kernel_source: str, cfg: EvaluationConfig) -> BuildOutcome:
        self.sizer.acquire()
        try:
            out = _safe_prebuild(kernel_source, cfg)
        finally:
            self.sizer.release()
        if out.usage is not None and out.status in ("built", "compile_error"):
            out.usage.wall_s = out.seconds
            self.sizer.record(out.usage)
        return out

    @property
    def pending(self) -> int:
        """Builds submitted and not finished."""
        with self._lock:
            return sum(not f.done() for f in self._futures.values()) + sum(not f.done() for f in self._sizes.values())

    def close(self, wait: bool = True) -> None:
        self._pool.shutdown(wait=wait, cancel_futures=not wait)

    def __enter__(self) -> BuildPool:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


#: Niceness of the build threads and so of every process they start ($KB_BUILD_NICE). On the H200
#: host a pool that filled the cores with compilers slowed the start of the next evaluation's
#: processes from ~2 s to 5-13 s while the GPU waited (docs/evaluation.md): a GPU worker's
#: processes at the default niceness take a shared core first, builds take the rest.
BUILD_NICE = 10


def _build_thread(cpus: list[int] | None) -> None:
    if cpus:
        os.sched_setaffinity(0, cpus)  # 0 = this thread (Linux): its children start with this mask
    nice = int(os.environ.get("KB_BUILD_NICE", BUILD_NICE))
    try:  # who 0 = this thread (Linux); its children inherit it
        os.setpriority(os.PRIO_PROCESS, 0, max(os.getpriority(os.PRIO_PROCESS, 0), nice))
    except OSError:
        pass


def _safe_prebuild(kernel_source: str, cfg: EvaluationConfig) -> BuildOutcome:
    try:
        return prebuild(kernel_source, cfg)
    except Exception as exc:  # noqa: BLE001 - a failed build stage leaves the build to the GPU phase
        return BuildOutcome("deferred", error=f"{type(exc).__name__}: {exc}")
