"""Precompiled torch headers: ``torch/extension.h`` parsed once per host, not once per kernel.

Every C++ wrapper ``load_inline`` writes (``main.cpp``) begins with ``#include <torch/extension.h>``,
and parsing that header is most of the wrapper's compile. gcc looks, in each include folder, for
``torch/extension.h.gch`` before ``torch/extension.h``; when that is a folder it tries every
precompiled header in it and uses the first one valid for the compilation (same optimisation level,
same macros that the header mentions, same language options), and otherwise parses the header as
usual. So the harness builds, once per key, one precompiled header per optimisation level that
kernels use, with exactly the flags torch's ``cpp_extension`` writes into ``build.ninja`` (taken
from torch's own ninja writer, less ``-DTORCH_EXTENSION_NAME``, which torch's headers never
mention), and names the folder in ``CPATH`` of the build and kernel processes. ``CPATH`` is not part
of ninja's command, so a build made with the header is up to date for a process without it, and the
object gcc writes is the same, byte for byte (``tests/evaluation/test_pch.py``).

The host side of a ``.cu`` file gets no precompiled header: nvcc hands gcc the output of cudafe++
(``<name>.cudafe1.cpp``), in which every header is already expanded, so there is no ``#include`` left
for a ``.gch`` to stand in for, and cudafe++ and cicc (EDG front ends) have no header cache. A
precompiled header in ``CPATH`` is harmless there: gcc ignores one that is not valid, and ``-E`` (the
preprocessing nvcc runs) reads the header itself.

Layout under ``<build_cache_dir>/.pch/`` (root-owned, 0755: kernels read it, never write it):

* ``<key>/include/torch/extension.h.gch/<variant>.gch`` and ``<key>/manifest.json``: a published
  entry, which only ever appears complete (built in ``.building/<key>.<pid>.<random>/``, renamed);
  ``<key>/failed.json`` instead records a header build that failed (``KB_PCH_RETRY_S`` later it is
  tried again);
* ``<key>/include/torch/extension.h``: a stand-in (``STAND_IN``) beside the precompiled ones. gcc,
  having used a ``.gch``, records the header as ``<key>/include/torch/extension.h``; a second
  ``#include <torch/extension.h>`` (the kernel's own source, after the one ``load_inline`` writes:
  most kernels) opens that very path, and without the file every such compile failed "No such file
  or directory". The stand-in includes the next ``torch/extension.h`` in the search path (a copy of
  torch's header would hide the slim ``.cu`` header that comes after this folder in ``CPATH``);
* an entry is ready (``manifest.json``) only after a compile through it passed inside the build
  sandbox (``prove``: a ``load_inline``-shaped ``main.cpp`` that includes the header twice, as the
  build uid, in the build's mount view, with each variant's flags, and gcc's ``-H`` naming the
  variant's ``.gch``). A failed proof is recorded like a failed build;
* ``.locks/<key>.lock``: the ``flock`` of whoever builds ``<key>``. It dies with its owner: a header
  build killed midway (SIGKILL included) leaves only an unpublished private folder, which the next
  owner removes, and nothing anybody waits on. The builder is a detached process of its own (PID 1
  of its own PID namespace where the host allows: its compilers die with it), started by the first
  build that needs the headers; builds wait for them at most ``wait_s``, then go on without them
  (``KB_PCH_BUILD_TIMEOUT_S`` bounds a header build, 1800 s).

The key: torch's version (which names its CUDA build), Python's, the device kind (a CUDA build's
``main.cpp`` also gets CUDA's include folder), the CUDA toolkit's version, the target architecture,
the compiler (``CXX``, its real path, version and target) and the variants' flags. ``KB_PCH=0``
turns it all off.
"""

from __future__ import annotations

import ctypes
import fcntl
import functools
import hashlib
import inspect
import json
import os
import secrets
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

from evaluation.builds.entry import _remove, cuda_toolkit_version
from evaluation.paths import PACKAGE_PARENT
from evaluation.results.harness_id import torch_version

#: "2": a stand-in header beside the precompiled ones, and an entry ready only once a compile
#: through it passed in the build sandbox (entries of format "1" broke every source that includes
#: ``torch/extension.h`` itself).
PCH_FORMAT = "2"
#: ``<key>/include/torch/extension.h``: what gcc opens for a second include of the header once it
#: used a ``.gch`` (or for the first, when no ``.gch`` is valid): the next ``torch/extension.h`` in
#: the search path, the slim ``.cu`` header where the build names it (evaluation.builds.slim_headers), else
#: torch's own, whose includes the ``.gch`` already holds (each ``#pragma once``: nothing is read twice).
STAND_IN = """/* The harness's stand-in beside the precompiled torch/extension.h (evaluation/builds/pch.py). */
#include_next <torch/extension.h>
"""
#: Optimisation levels kernels pass in ``extra_cflags`` (the corpus's 100 CUDA kernels: 87 none or
#: an empty flag, 13 ``-O3``); gcc uses a precompiled header only at its own optimisation level.
DEFAULT_VARIANTS: dict[str, tuple[str, ...]] = {"default": (), "O3": ("-O3",)}
HEADER = "torch/extension.h"
MANIFEST = "manifest.json"
FAILED = "failed.json"
#: Environment variables a header build must not inherit: they would change what gcc reads.
SCRUBBED_ENV = ("CPATH", "CPLUS_INCLUDE_PATH", "C_INCLUDE_PATH", "GCC_EXEC_PREFIX", "COMPILER_PATH",
                "DEPENDENCIES_OUTPUT", "SUNPRO_DEPENDENCIES")
BOOT = "import sys; sys.path.insert(0, {parent!r}); from evaluation.builds.pch import builder_main; builder_main()"
#: The header builders this process started (one per key at most).
_BUILDERS: dict[str, subprocess.Popen[bytes]] = {}
_BUILDERS_LOCK = threading.Lock()


def enabled() -> bool:
    return os.environ.get("KB_PCH", "1") != "0"


def variants() -> dict[str, tuple[str, ...]]:
    """The variants built: $KB_PCH_VARIANTS (``default,O2,O3``), else ``DEFAULT_VARIANTS``."""
    names = [n for n in os.environ.get("KB_PCH_VARIANTS", "").split(",") if n.strip()]
    if not names:
        return dict(DEFAULT_VARIANTS)
    return {n.strip(): (() if n.strip() == "default" else (f"-{n.strip()}",)) for n in names}


@functools.lru_cache(maxsize=8)
def compiler_identity(cxx: str) -> str:
    """The C++ compiler torch will call: its real path, version and target ("" if it does not run)."""
    path = shutil.which(cxx)
    if not path:
        return ""
    parts = [os.path.realpath(path)]
    for flag in ("-dumpfullversion", "-dumpmachine"):
        try:
            parts.append(subprocess.run([path, flag], capture_output=True, text=True, timeout=30).stdout.strip())
        except (OSError, subprocess.SubprocessError):
            return ""
    return " ".join(parts)


def pch_key(device: str, arch: str = "", variant_flags: dict[str, tuple[str, ...]] | None = None) -> str:
    cxx = os.environ.get("CXX", "c++")
    parts = [PCH_FORMAT, torch_version(), sys.version.split()[0], device,
             cuda_toolkit_version() if device == "cuda" else "", arch, cxx, compiler_identity(cxx),
             json.dumps(sorted((variant_flags or variants()).items()))]
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:24]


class HeaderCache:
    """The precompiled headers of one key under ``<cache_root>/.pch``."""

    def __init__(self, cache_root: str, device: str, arch: str = "", hide_paths: tuple[str, ...] = ()) -> None:
        self._set(os.path.join(cache_root, ".pch"), "", device, variants(), arch)
        self.hide_paths = tuple(hide_paths)  # the builds' own: the proof's sandbox hides them too

    @classmethod
    def at(cls, root: str, key: str, device: str, variant_flags: dict[str, tuple[str, ...]]) -> HeaderCache:
        """The entry of a known key (in the builder process)."""
        self = cls.__new__(cls)
        self._set(root, key, device, variant_flags)
        self.hide_paths = ()
        return self

    def _set(self, root: str, key: str, device: str, variant_flags: dict[str, tuple[str, ...]], arch: str = "") -> None:
        self.variant_flags = variant_flags
        self.device = device
        self.root = root
        self.key = key or pch_key(device, arch, variant_flags)
        self.path = os.path.join(self.root, self.key)
        self.include_dir = os.path.join(self.path, "include")

    # -- state ---------------------------------------------------------------------------------
    @property
    def ready(self) -> bool:
        """Published, and built (not a recorded failure)."""
        return os.path.isfile(os.path.join(self.path, MANIFEST))

    def _failed_recently(self) -> bool:
        try:
            age = time.time() - os.stat(os.path.join(self.path, FAILED)).st_mtime
        except OSError:
            return False
        return age < float(os.environ.get("KB_PCH_RETRY_S", "3600"))

    def failure(self) -> str:
        """What the recorded failure of the header build says ("" when none is recorded)."""
        try:
            with open(os.path.join(self.path, FAILED), encoding="utf-8") as fh:
                data = json.load(fh)
        except (OSError, ValueError):
            return ""
        return str(data.get("error") or "failed") if isinstance(data, dict) else "failed"

    def manifest(self) -> dict[str, Any]:
        try:
            with open(os.path.join(self.path, MANIFEST), encoding="utf-8") as fh:
                data = json.load(fh)
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def env(self) -> dict[str, str]:
        """What a build or kernel process needs to find the headers (nothing when there are none)."""
        return {"CPATH": self.include_dir} if enabled() and self.ready else {}

    # -- building ------------------------------------------------------------------------------
    @property
    def lock_path(self) -> str:
        return os.path.join(self.root, ".locks", self.key + ".lock")

    def ensure(self, wait_s: float = 0.0) -> bool:
        """Have the headers built unless somebody is building them, and wait for them ``wait_s`` at
        most; True if published. The builder is a process of its own, detached (a worker that dies
        does not take it along), holding the key's lock: a lock nobody holds (its builder died) is
        taken over at once, so a dead builder is never waited on."""
        if not enabled():
            return False
        deadline = time.monotonic() + wait_s
        while True:
            if self.ready:
                return True
            if self._failed_recently():
                return False
            self._spawn_if_free()
            if time.monotonic() >= deadline:
                return self.ready
            time.sleep(min(0.5, max(0.0, deadline - time.monotonic())))

    def _prepare_root(self) -> bool:
        try:
            for sub in ("", ".building", ".locks"):
                os.makedirs(os.path.join(self.root, sub), mode=0o755, exist_ok=True)
            if os.geteuid() == 0:  # a kernel's uid may neither take the lock nor write a header
                # The build cache's root as the build cache makes it (traversed, never listed): the
                # proof's sandbox and every build reach the headers through it, maybe before any build.
                os.chmod(os.path.dirname(self.root), 0o711)
                os.chmod(self.root, 0o755)
                os.chmod(os.path.join(self.root, ".locks"), 0o700)
        except OSError:
            return False
        return True

    def _spawn_if_free(self) -> None:
        with _BUILDERS_LOCK:
            running = _BUILDERS.get(self.path)
            if running is not None and running.poll() is None:
                return
            if not self._prepare_root() or lock_held(self.lock_path):
                return
            spec = {"root": self.root, "key": self.key, "device": self.device,
                    "variants": {k: list(v) for k, v in self.variant_flags.items()},
                    "timeout_s": float(os.environ.get("KB_PCH_BUILD_TIMEOUT_S", "1800")),
                    "hide_paths": list(self.hide_paths)}
            _BUILDERS[self.path] = spawn_builder(spec)

    def build_locked(self, timeout_s: float) -> str:
        """In the builder, under the lock: remove what a dead builder left, build in a private
        folder, publish by rename, prove the published headers in the build sandbox, and only then
        write the manifest (what makes them ready); a failure is recorded instead. "" if ready,
        else what went wrong."""
        t0 = time.monotonic()
        building = os.path.join(self.root, ".building")
        for name in os.listdir(building):
            if name.startswith(self.key + "."):
                _remove(os.path.join(building, name))  # a builder that died: we hold its lock now
        _remove(self.path)  # an old failure record, or headers a dead builder published unproven
        private = os.path.join(building, f"{self.key}.{os.getpid()}.{secrets.token_hex(4)}")
        os.makedirs(private, mode=0o755)
        manifest: dict[str, Any] = {}
        error = compile_headers(private, self.device, self.variant_flags, timeout_s, manifest)
        _make_readable(private)
        # Proven where builds will find them: the published path, in the build sandbox's view.
        os.rename(private, self.path)
        if not error:
            error, proof = prove(self, max(1.0, t0 + timeout_s - time.monotonic()))
            manifest["proof"] = proof
        if error:
            _remove(self.include_dir)
            _write_json(os.path.join(self.path, FAILED), {"error": error, "at": time.time()})
        else:
            _write_json(os.path.join(self.path, MANIFEST), manifest)
        return error


def _write_json(path: str, data: dict[str, Any]) -> None:
    """Written whole or not at all (a reader sees the file only once complete), 0644."""
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(data, fh, indent=1)
    os.chmod(tmp, 0o644)
    os.rename(tmp, path)


def lock_held(path: str) -> bool:
    """Whether somebody holds the ``flock`` on ``path`` (a dead holder holds nothing)."""
    try:
        fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o600)
    except OSError:
        return True  # cannot tell: do not start a builder
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return False
    except OSError:
        return True
    finally:
        os.close(fd)


def _make_readable(path: str) -> None:
    for dirpath, _dirnames, filenames in os.walk(path):
        os.chmod(dirpath, 0o755)
        for f in filenames:
            os.chmod(os.path.join(dirpath, f), 0o644)


def _die_with_parent() -> None:
    """In a compiler the builder starts (before exec): SIGKILL when the builder dies."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def spawn_builder(spec: dict[str, Any]) -> subprocess.Popen[bytes]:
    """Start the header builder (``builder_main``), detached, as PID 1 of a PID namespace of its own
    where the host allows one (``unshare --pid --kill-child``: whatever kills the builder kills its
    compilers); its output goes to ``build.log`` in its folder."""
    from evaluation.sandbox.isolation import detect_isolation  # deferred: only when a header build starts

    iso = detect_isolation()
    prefix = [*iso.get("prefix", []), "--"] if iso.get("mode") in ("root", "userns") else []
    env = {k: v for k, v in os.environ.items() if k not in SCRUBBED_ENV}
    return subprocess.Popen([*prefix, sys.executable, "-c", BOOT.format(parent=PACKAGE_PARENT), json.dumps(spec)],
                            env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True, close_fds=True)


# -- the builder process -------------------------------------------------------------------------
def torch_cxx_command(device: str, extra_cflags: list[str]) -> tuple[str, list[str]]:
    """The compiler and flags torch's ``cpp_extension`` writes into ``build.ninja`` for ``main.cpp``
    (from torch's own ninja writer, so they are the same by construction)."""
    from torch.utils import cpp_extension  # deferred: torch, in the builder process only

    writer = cpp_extension._write_ninja_file_to_build_library
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "build.ninja")
        args: dict[str, Any] = {
            "path": path, "name": "kb_pch", "sources": [os.path.join(tmp, "main.cpp")],
            "extra_cflags": list(extra_cflags), "extra_cuda_cflags": [], "extra_sycl_cflags": [],
            "extra_ldflags": [], "extra_include_paths": [], "with_cuda": device == "cuda", "with_sycl": False,
            "is_standalone": False}
        accepted = inspect.signature(writer).parameters  # torch versions differ (SYCL came in 2.7)
        writer(**{k: v for k, v in args.items() if k in accepted})
        with open(path, encoding="utf-8") as fh:
            lines = dict(line.split(" = ", 1) for line in fh.read().splitlines() if " = " in line)
    flags = [f for f in shlex.split(lines.get("cflags", "")) if not f.startswith("-DTORCH_EXTENSION_NAME=")]
    return lines.get("cxx", "c++").strip(), flags


def compile_headers(private: str, device: str, variant_flags: dict[str, tuple[str, ...]], timeout_s: float,
                    manifest: dict[str, Any]) -> str:
    """One compiler per variant, side by side, into ``<private>/include``, and torch's header copied
    beside them; what was done into ``manifest`` (written by the caller once the headers are
    proven). "" when every variant was built, else what went wrong (the compilers' output:
    ``build.log``)."""
    import resource  # deferred: the builder process only

    import torch  # deferred: the builder process only

    header = os.path.join(os.path.dirname(torch.__file__), "include", HEADER)
    out_dir = os.path.join(private, "include", HEADER + ".gch")
    os.makedirs(out_dir, mode=0o755)
    t0 = time.monotonic()
    procs, commands = {}, {}
    with open(os.path.join(private, "build.log"), "wb") as log:
        for name, extra in variant_flags.items():
            cxx, flags = torch_cxx_command(device, list(extra))
            cmd = [*shlex.split(cxx), *flags, "-x", "c++-header", header, "-o", os.path.join(out_dir, name + ".gch")]
            commands[name] = cmd
            log.write((shlex.join(cmd) + "\n").encode())
            log.flush()
            procs[name] = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                           preexec_fn=_die_with_parent)
        try:
            failed = [name for name, p in procs.items() if p.wait(timeout=max(1.0, t0 + timeout_s - time.monotonic())) != 0]
        except subprocess.TimeoutExpired:
            return f"the header build took longer than {timeout_s:.0f} s"  # the compilers die with us
    if failed:
        return f"the header build failed for {failed} (see build.log)"
    # The file gcc names once it used a .gch: a second #include of the header opens it (module doc).
    with open(os.path.join(private, "include", HEADER), "w", encoding="utf-8") as fh:
        fh.write(STAND_IN)
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)  # the compilers, reaped by wait() above
    manifest.update({"format": PCH_FORMAT, "torch": torch.__version__, "device": device, "header": header,
                     "commands": commands, "seconds": round(time.monotonic() - t0, 3),
                     "cpu_s": round(ru.ru_utime + ru.ru_stime, 3), "max_rss_mb": round(ru.ru_maxrss / 1024, 1),
                     "bytes": {n: os.path.getsize(os.path.join(out_dir, n + ".gch")) for n in commands}})
    return ""


#: The proof's source: what ``load_inline`` writes into ``main.cpp`` (its include, then the
#: kernel's own source, which most often includes the header again, then the bindings).
PROOF_SOURCE = """#include <torch/extension.h>
#include <torch/extension.h>
torch::Tensor kb_pch_probe(torch::Tensor x) { return x + 1; }
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("kb_pch_probe", &kb_pch_probe); }
"""


def prove(entry: HeaderCache, timeout_s: float) -> tuple[str, dict[str, float]]:
    """Compile ``PROOF_SOURCE`` through the published headers, once per variant, each inside a build
    sandbox of its own (the build's uid, mount view and limits): ("", seconds per variant) when
    every compile passed and gcc used the variant's ``.gch`` (``-H``: ``! <path>``), else (what
    failed, ...). Anything that goes wrong is a failed proof, never an exception: a builder that
    died here would leave headers that are built again and again."""
    t0 = time.monotonic()
    proof: dict[str, float] = {}
    for name, extra in entry.variant_flags.items():
        try:
            error = _prove_variant(entry, name, extra, max(1.0, t0 + timeout_s - time.monotonic()))
        except Exception as exc:  # noqa: BLE001 - recorded as the header build's failure
            error = f"the proof of {name} could not run: {type(exc).__name__}: {exc}"
        proof[name] = round(time.monotonic() - t0 - sum(proof.values()), 3)
        if error:
            return error, proof
    return "", proof


def _prove_variant(entry: HeaderCache, name: str, extra: tuple[str, ...], timeout_s: float) -> str:
    from evaluation.sandbox.sandbox import Sandbox  # deferred: the builder process only

    sandbox = Sandbox(device="cpu", size_scale=1, memory_limit_mb=int(os.environ.get("KB_PCH_PROOF_MB", "8192")),
                      hide_paths=entry.hide_paths, expose=(os.path.dirname(entry.root),),
                      extra_env={"CPATH": entry.include_dir, "CUDA_VISIBLE_DEVICES": ""})
    try:
        src = sandbox.write_source("main.cpp", PROOF_SOURCE)
        cxx, flags = torch_cxx_command(entry.device, list(extra))
        argv = [*shlex.split(cxx), *flags, "-DTORCH_EXTENSION_NAME=kb_pch_probe", "-Winvalid-pch", "-H",
                "-c", src, "-o", "main.o"]
        cmd, env, workdir = sandbox.command("build", argv)
        try:
            r = subprocess.run(cmd, env=env, cwd=workdir, capture_output=True, text=True, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return f"the proof of {name} took longer than {timeout_s:.0f} s"
    finally:
        sandbox.close()
    used = os.path.join(entry.include_dir, HEADER + ".gch", name + ".gch")
    if r.returncode == 0 and f"! {used}" in r.stderr.splitlines():
        return ""
    lines = [ln for ln in r.stderr.splitlines() if not ln.startswith(".")]
    first = [ln for ln in lines if "error" in ln][:3] or lines[-6:]  # the first errors say why
    return f"the proof of {name} failed in the build sandbox: " + " | ".join(first)[:1500]


def builder_main() -> None:
    """Entry of the header builder: take the key's lock or leave (somebody is building), build,
    publish; exit status 0 when published (built or a recorded failure), 1 when it failed (recorded
    too where the disk allows: retried after ``KB_PCH_RETRY_S``, not by the next build at once)."""
    spec = json.loads(sys.argv[1])
    entry = HeaderCache.at(spec["root"], spec["key"], spec["device"],
                           {k: tuple(v) for k, v in spec["variants"].items()})
    entry.hide_paths = tuple(spec.get("hide_paths", ()))
    fd = os.open(entry.lock_path, os.O_CREAT | os.O_RDWR, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return  # another builder holds it
    if entry.ready or entry._failed_recently():
        return
    try:
        entry.build_locked(float(spec["timeout_s"]))
    except Exception as exc:  # noqa: BLE001 - recorded: else every build would start this one again
        try:
            _remove(entry.path)
            os.makedirs(entry.path, mode=0o755)
            _write_json(os.path.join(entry.path, FAILED), {"error": f"the header builder failed: "
                                                           f"{type(exc).__name__}: {exc}", "at": time.time()})
        except OSError:
            pass
        sys.exit(1)
