"""How a sandboxed process is confined on this host: the isolation mode, the work root, and what
its mount namespace hides, re-exposes and makes its own.

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
import os
import platform
import shutil
import stat
import subprocess
import sys
import sysconfig
from typing import Any

from evaluation.paths import PACKAGE_DIR


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
