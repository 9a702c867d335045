"""The per-source build directory: cache location, lock, ownership.

Each kernel source gets ``<build_cache_dir>/<build_key>/`` with ``torch_extensions/`` and ``triton/``
(the kernel process's TORCH_EXTENSIONS_DIR and TRITON_CACHE_DIR). While an evaluation runs, the
directory belongs to the kernel's uid; afterwards it goes back to root. Evaluations of the same
source on one host are serialised by a lock in a root-owned directory beside the cache entries.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import sys
import time
from importlib.metadata import PackageNotFoundError, version

BUILT_MARKER = ".kb_built"


def _torch_version() -> str:
    try:
        return version("torch")
    except PackageNotFoundError:
        return "unknown"


def build_key(kernel_source: str, device: str) -> str:
    blob = "\0".join([kernel_source, device, _torch_version(), sys.version.split()[0],
                      os.environ.get("TORCH_CUDA_ARCH_LIST", ""), os.environ.get("CUDA_VISIBLE_DEVICES", "")])
    return hashlib.sha256(blob.encode()).hexdigest()[:24]


def _chown_tree(path: str, uid: int, gid: int) -> None:
    for dirpath, dirnames, filenames in os.walk(path):
        for name in [dirpath] + [os.path.join(dirpath, f) for f in dirnames + filenames]:
            try:
                os.lchown(name, uid, gid)
            except OSError:
                pass


class BuildDir:
    """The build directory of one kernel source (``path`` is None when the cache is unusable)."""

    def __init__(self, cache_root: str, kernel_source: str, device: str) -> None:
        self.path: str | None = None
        self._lock_fd: int | None = None
        try:
            os.makedirs(cache_root, mode=0o755, exist_ok=True)
            if os.geteuid() == 0:
                os.chmod(cache_root, 0o755)
            path = os.path.join(cache_root, build_key(kernel_source, device))
            os.makedirs(path, mode=0o755, exist_ok=True)
            for sub in ("torch_extensions", "triton"):
                os.makedirs(os.path.join(path, sub), exist_ok=True)
            self.path = path
        except OSError:
            self.path = None

    @property
    def built(self) -> bool:
        """Whether a kernel from this source was built and loaded here before."""
        return self.path is not None and os.path.exists(os.path.join(self.path, BUILT_MARKER))

    def lock(self, deadline: float) -> None:
        """Take the per-source lock (waiting until ``deadline`` at most; then go on without it)."""
        if not self.path:
            return
        locks = os.path.join(os.path.dirname(self.path), ".locks")
        try:
            os.makedirs(locks, mode=0o700, exist_ok=True)
            fd = os.open(os.path.join(locks, os.path.basename(self.path) + ".lock"), os.O_CREAT | os.O_RDWR, 0o600)
        except OSError:
            return
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                self._lock_fd = fd
                return
            except OSError:
                if time.monotonic() > deadline:
                    os.close(fd)
                    return
                time.sleep(0.2)

    def give_to(self, uid: int) -> None:
        """Hand the directory tree to ``uid`` (0 = back to root)."""
        if self.path:
            _chown_tree(self.path, uid, uid)

    def mark_built(self) -> None:
        if not self.path:
            return
        try:
            with open(os.path.join(self.path, BUILT_MARKER), "w") as fh:
                fh.write(f"{time.time()}\n")
        except OSError:
            pass

    def unlock(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # releases the flock
            self._lock_fd = None
