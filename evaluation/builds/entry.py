"""The build cache: one published directory per build key, built in private folders.

Layout under ``build_cache_dir``:

* ``<key>/``: a published entry (``torch_extensions/``, ``triton/``, ``.kb_built``). It only ever
  appears complete, by ``rename`` of the private folder it was built in.
* ``.building/<key>.<pid>.<random>/``: a build in progress. While it runs, ``<key>`` is a symbolic
  link to it, so that the build sees the very paths the published entry will have: torch's
  ``load_inline`` writes absolute paths into ``build.ninja``, and ninja rebuilds everything when a
  command changes, so a build made under another path would be rebuilt on first use.
* ``.locks/<key>.lock``: a ``flock`` held by whoever builds or uses ``<key>``. The kernel dies, the
  parent dies, the lock goes with it: nobody ever waits on a dead owner. A ``<key>`` that is still
  a link (its owner died before publishing) is removed with its private folder and built again,
  and torch's own ``lock`` files (``FileBaton``) and ninja's ``.ninja_lock`` left in an entry by a
  process killed midway are removed before the entry is used (we hold the flock: they are stale).

The key is the source, the device kind, torch (its version names the CUDA build, e.g.
``2.11.0+cu130``), the CUDA toolkit, Python, the target architecture and the compiler settings
(those of the environment too: evaluation.builds.cu_flags), and the folders whose paths torch writes
into ``build.ninja`` (``key_paths``: a checkout or an environment elsewhere gets entries of its own);
never a device index, so one build serves every GPU of a host (and every host sharing the folder
with the same paths).
"""

from __future__ import annotations

import fcntl
import functools
import hashlib
import importlib.util
import json
import os
import re
import secrets
import shutil
import subprocess
import sys
import sysconfig
import time

from evaluation.builds.cu_flags import nvcc_append_flags
from evaluation.builds.nvcc_steps import enabled as split_nvcc
from evaluation.paths import PACKAGE_DIR
from evaluation.results.harness_id import torch_version
from evaluation.sandbox.safe_files import (
    TreePolicy,
    UnsafeFile,
    chown_tree,
    clean_tree,
    read_below,
    remove_below,
    subdirectories,
    write_new,
)
from evaluation.sandbox.sandbox import sandbox_path

BUILT_MARKER = ".kb_built"
#: A build that failed in the compiler: its message, so that the source is not compiled again.
FAILED_MARKER = ".kb_compile_error.json"
#: Files a killed ``load_inline`` leaves behind that make the next one wait forever.
STALE_LOCKS = ("lock", ".ninja_lock")
#: Environment variables that change what the compiler produces (part of the key).
COMPILER_ENV = ("CC", "CXX", "CUDA_HOME", "CUDA_PATH")
#: Bumped when the harness changes how kernels are built.
BUILD_FORMAT = "2"
#: Bytes a published entry may hold (``BuildDir.max_bytes``; EvaluationConfig.build_entry_max_mb).
DEFAULT_ENTRY_MAX_MB = 2048
#: Largest marker or ninja log the worker reads from an entry.
MAX_READ_BYTES = 4 * 2**20

_NEEDS_BUILD = re.compile(r"cpp_extension|load_inline")


def needs_build(kernel_source: str) -> bool:
    """Whether importing the kernel compiles native code through ``torch.utils.cpp_extension``."""
    return bool(_NEEDS_BUILD.search(kernel_source))


def units_enabled() -> bool:
    """Whether builds compile their C++ wrapper through the unit server (evaluation.builds.units; ``KB_UNITS=0``: off)."""
    return os.environ.get("KB_UNITS", "1") != "0"


@functools.lru_cache(maxsize=1)
def cuda_toolkit_version() -> str:
    """The CUDA toolkit's version (``version.json`` of CUDA_HOME, else ``nvcc --version``); "" without one."""
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH") or "/usr/local/cuda"
    try:
        with open(os.path.join(home, "version.json"), encoding="utf-8") as fh:
            return str(json.load(fh).get("cuda", {}).get("version", ""))
    except (OSError, ValueError, AttributeError):
        pass
    nvcc = shutil.which("nvcc") or os.path.join(home, "bin", "nvcc")
    try:
        out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return ""
    m = re.search(r"release ([\d.]+)", out)
    return m.group(1) if m else ""


def torch_cuda_home() -> str:
    """The CUDA toolkit torch finds in a kernel's or a build's process, found as torch finds it
    (``cpp_extension._find_cuda_home``: CUDA_HOME or CUDA_PATH, else nvcc on the sandbox's PATH, else
    /usr/local/cuda where it exists); "" without one."""
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    if home:
        return home
    nvcc = shutil.which("nvcc", path=sandbox_path())
    if nvcc:
        return os.path.dirname(os.path.dirname(nvcc))
    return "/usr/local/cuda" if os.path.exists("/usr/local/cuda") else ""


def key_paths(device: str) -> tuple[str, ...]:
    """The folders whose paths torch writes into an entry's ``build.ninja``: this package (its
    compiler shims, builds/unit_cc and builds/nvcc_split), torch (its headers and libraries), Python's
    headers and, for CUDA, the toolkit. torch rewrites ``build.ninja`` wherever one of them differs,
    and a kernel cannot write in a published entry (``lend``: read-only), so an entry made by a
    checkout or an environment at other paths would fail the kernel's load: such paths get their own."""
    spec = importlib.util.find_spec("torch")  # its location, without importing it
    torch_dirs = list(spec.submodule_search_locations or []) if spec else []
    paths = [PACKAGE_DIR, os.path.abspath(torch_dirs[0]) if torch_dirs else "",
             sysconfig.get_path("include", scheme="posix_prefix")]  # fmt: skip  (as torch asks for it)
    if device == "cuda":
        paths.append(torch_cuda_home())
    return tuple(paths)


#: An absolute path in ``build.ninja``: a value, a word of a command (maybe quoted), or glued to
#: -isystem, -I, -L or a comma (-Wl,-rpath,/x).
_NINJA_PATH = re.compile(r"(?:^|[\s=,'\"]|-isystem|-I|-L)(/[^\s:,'\"]+)", re.MULTILINE)


def paths_outside_key(entry: str, device: str) -> list[str]:
    """The paths an entry's ``build.ninja`` files name outside the entry itself, ``key_paths(device)``
    and the compilers the environment names (COMPILER_ENV): none while the key is whole (the build
    tests check it on the CPU, the GPU check on its CUDA builds)."""
    named: set[str] = set()
    for name in subdirectories(entry, ["torch_extensions"]):
        raw = read_below(entry, ["torch_extensions", name, "build.ninja"], MAX_READ_BYTES)
        named.update(_NINJA_PATH.findall((raw or b"").decode("utf-8", "replace")))
    roots = [entry, *key_paths(device), *(os.environ.get(k, "") for k in COMPILER_ENV)]
    roots = [r.rstrip(os.sep) for r in roots if os.path.isabs(r)]
    return sorted(p for p in named if not any(p == r or p.startswith(r + os.sep) for r in roots))


def build_key(kernel_source: str, device: str, arch: str = "", root: str = "") -> str:
    """The cache key of a kernel source; ``arch`` is the target architecture (TORCH_CUDA_ARCH_LIST),
    ``root`` the cache's folder (its path is in ``build.ninja`` too: one folder reached by two paths,
    a mount, gets an entry for each)."""
    parts = [BUILD_FORMAT, kernel_source, device, torch_version(), sys.version.split()[0],
             cuda_toolkit_version() if device == "cuda" else "", arch, *key_paths(device),
             os.path.abspath(root) if root else ""]  # fmt: skip
    parts += [f"{k}={os.environ.get(k, '')}" for k in COMPILER_ENV]
    if units_enabled():  # the build's CXX is then evaluation/builds/unit_cc: in ninja's commands
        parts.append("units")
    nvcc_flags = nvcc_append_flags(device)
    if nvcc_flags:  # not in ninja's commands (NVCC_APPEND_FLAGS): only the key tells the builds apart
        parts.append(f"nvcc {nvcc_flags}")
    if device == "cuda" and split_nvcc():  # ninja's commands name evaluation/builds/nvcc_split
        parts.append("nvcc_split")
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:24]


def _remove(path: str) -> None:
    """Remove a file, a link or a tree, whatever is there, by descriptors at any depth (the folder
    holding ``path`` is the worker's)."""
    remove_below(os.path.dirname(path), [os.path.basename(path)])


class BuildDir:
    """The cache entry of one kernel source (``path`` is None when the cache is unusable).

    Use: ``lock()``; then ``built`` (published), ``failure`` (a compiler error recorded), or
    ``begin()`` a build in a private folder and ``publish()`` or ``abandon()`` it; ``unlock()``.
    """

    def __init__(self, cache_root: str, kernel_source: str, device: str, arch: str = "") -> None:
        cache_root = os.path.abspath(cache_root) if cache_root else cache_root  # one spelling: key and path
        self.path: str | None = None
        self.key = build_key(kernel_source, device, arch, cache_root)
        self.root = cache_root
        self.private: str | None = None  # the folder being built in, while a build runs
        self._lock_fd: int | None = None
        self.max_bytes = DEFAULT_ENTRY_MAX_MB * 2**20
        self.refused: str | None = None  # why the last publish() refused the build
        try:
            for sub in ("", ".building", ".locks"):
                os.makedirs(os.path.join(cache_root, sub), mode=0o755, exist_ok=True)
            if os.geteuid() == 0:
                # Kernels may traverse to their own entry but list none (they cannot guess keys).
                os.chmod(cache_root, 0o711)
                os.chmod(os.path.join(cache_root, ".building"), 0o711)
                os.chmod(os.path.join(cache_root, ".locks"), 0o700)
            self.path = os.path.join(cache_root, self.key)
        except OSError:
            self.path = None

    # -- state ---------------------------------------------------------------------------------
    @property
    def built(self) -> bool:
        """Whether the entry is published (complete)."""
        return (self.path is not None and not os.path.islink(self.path)
                and os.path.exists(os.path.join(self.path, BUILT_MARKER)))

    @property
    def failure(self) -> dict[str, str] | None:
        """The compiler error recorded for this source (``error``, ``log``), if its build failed."""
        if not self.built:
            return None
        raw = read_below(self.path or "", [FAILED_MARKER], MAX_READ_BYTES)
        try:
            data = json.loads(raw or b"")
        except ValueError:
            return None
        return data if isinstance(data, dict) else None

    @property
    def work(self) -> str | None:
        """The real directory the kernel's processes write in (the private folder during a build)."""
        return self.private or (self.path if self.built else None)

    @property
    def locked(self) -> bool:
        return self._lock_fd is not None

    # -- lock ----------------------------------------------------------------------------------
    def lock(self, deadline: float | None = None, wait: bool = True) -> bool:
        """Take the per-key flock (waiting until ``deadline`` at most, or not at all); True if held."""
        if not self.path:
            return False
        if self._lock_fd is not None:
            return True
        try:
            fd = os.open(os.path.join(self.root, ".locks", self.key + ".lock"), os.O_CREAT | os.O_RDWR, 0o600)
        except OSError:
            return False
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                self._lock_fd = fd
                os.utime(fd)  # the entry's last use (evaluation.builds.cache_evict)
                self._clean_stale()
                return True
            except OSError:
                if not wait or (deadline is not None and time.monotonic() > deadline):
                    os.close(fd)
                    return False
                time.sleep(0.1)

    def unlock(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # releases the flock
            self._lock_fd = None

    def _clean_stale(self) -> None:
        """Under the lock: what an owner that died left behind (an unpublished link and its private
        folder, torch's and ninja's lock files in a published entry)."""
        assert self.path is not None
        if os.path.islink(self.path):
            target = os.path.join(os.path.dirname(self.path), os.readlink(self.path))
            _remove(self.path)
            _remove(target)
        elif os.path.isdir(self.path) and not self.built:
            _remove(self.path)  # a folder without its marker was not published by us
        # Real folders only, by descriptors: a kernel may have planted links (evaluation.sandbox.safe_files).
        for name in subdirectories(self.path, ["torch_extensions"]):
            for stale in STALE_LOCKS:
                remove_below(self.path, ["torch_extensions", name, stale])

    # -- a build -------------------------------------------------------------------------------
    def begin(self) -> str | None:
        """Under the lock, for an unpublished key: make a private folder and point ``<key>`` at it."""
        if not self.path or self._lock_fd is None or self.built:
            return None
        private = os.path.join(self.root, ".building", f"{self.key}.{os.getpid()}.{secrets.token_hex(4)}")
        try:
            for sub in ("torch_extensions", "triton"):
                os.makedirs(os.path.join(private, sub), mode=0o755)
            os.symlink(os.path.relpath(private, self.root), self.path)
        except OSError:
            _remove(private)
            return None
        self.private = private
        return private

    def publish(self, failure: dict[str, str] | None = None) -> bool:
        """Mark the private folder complete and rename it into place (a compiler error is recorded
        in it, so that the same source is never compiled again)."""
        if not self.private or not self.path:
            return False
        private, self.private = self.private, None
        try:
            if not self._sanitize(private):
                raise OSError(f"build refused: {self.refused}")
            if failure is not None:
                write_new(private, FAILED_MARKER, json.dumps(failure).encode())
            write_new(private, BUILT_MARKER, f"{time.time()}\n".encode())
            os.unlink(self.path)
            os.rename(private, self.path)
            return True
        except (OSError, UnsafeFile):
            _remove(private)
            _remove(self.path)
            return False
        except BaseException:  # a bug: nothing half-published stays, and it is not hidden
            _remove(private)
            _remove(self.path)
            raise

    def _sanitize(self, private: str) -> bool:
        """Keep only plain files and folders of the build (no links, FIFOs, devices), the worker's,
        mode 0755/0644, within ``max_bytes``; the kernel's processes are gone by now."""
        root = os.geteuid() == 0
        report = clean_tree(private, TreePolicy(uid=0 if root else None, gid=0, max_bytes=self.max_bytes))
        os.chmod(private, 0o700)  # only the worker lists an entry; a kernel is lent its own (lend())
        if report.over_budget:
            self.refused = f"the build left {report.bytes} bytes, over the entry's budget of {self.max_bytes}"
        return not report.over_budget

    def lend(self, gid: int) -> None:
        """Open the published entry to a kernel's group for one evaluation, read-only: its files stay
        the worker's (0644); folders are sticky and group-writable, so that torch's ``lock`` files can
        be made but nothing of the build can be changed or removed. ``reclaim()`` undoes it."""
        if self.path and self.built:
            clean_tree(self.path, TreePolicy(uid=0, gid=gid, dir_mode=0o1770))
            os.chown(self.path, 0, gid)
            os.chmod(self.path, 0o750)

    def reclaim(self) -> None:
        """After the kernel's processes are gone: remove whatever they added (not the worker's) and
        close the entry again (0700)."""
        if self.path and self.built:
            clean_tree(self.path, TreePolicy(uid=0, gid=0, keep=lambda st: st.st_uid == 0))
            os.chown(self.path, 0, 0)
            os.chmod(self.path, 0o700)
    def drop(self) -> None:
        """Under the lock: remove a published entry, so that its source is built again (one that
        recorded a killed build as a compiler error: evaluation.builds.stage.recorded_failure)."""
        if self.path and self._lock_fd is not None and self.built:
            _remove(self.path)

    def abandon(self) -> None:
        """Drop a build that did not finish (nothing is published)."""
        if self.private and self.path:
            _remove(self.path)
            _remove(self.private)
        self.private = None

    def give_to(self, uid: int) -> None:
        """Hand the real directory tree to ``uid`` (0 = back to root), by descriptors: no link is
        followed, no FIFO opened, nothing deeper than ``safe_files.MAX_DEPTH`` walked (publish()
        removes it), so that it is safe even if a kernel's process still changes the tree."""
        if self.work:
            chown_tree(self.work, uid, uid)
