"""A small tmpfs to run out of space on, for the fault tests (issue 20 case 1). Needs root (mount);
callers skip with the reason when it cannot be mounted."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def small_tmpfs(size_mb: int = 32) -> Iterator[Path]:
    """Mount a tmpfs of `size_mb` on a new folder directly under the temporary directory (a mount
    nested deeper is lost by the sandbox's own bind mounts) for the block; raise OSError with the
    reason when that is not allowed here."""
    if os.geteuid() != 0 or not shutil.which("mount"):
        raise OSError("mounting a tmpfs needs root")
    path = Path(tempfile.mkdtemp(prefix="kb-tmpfs-"))
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size_mb}m,mode=1777", "tmpfs", str(path)], capture_output=True, text=True
    )
    if done.returncode != 0:
        path.rmdir()
        raise OSError(f"cannot mount a tmpfs: {done.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)
        with contextlib.suppress(OSError):
            path.rmdir()


def fill(path: Path, leave_kb: int) -> Path:
    """Fill the file system of `path` until `leave_kb` KB are left; returns the filler file."""
    filler = path / "filler"
    filler.unlink(missing_ok=True)
    free = shutil.disk_usage(path).free
    with open(filler, "wb") as fh:
        os.posix_fallocate(fh.fileno(), 0, max(0, free - leave_kb * 1024))
    return filler
