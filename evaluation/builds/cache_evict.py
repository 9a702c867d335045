"""Eviction of the build cache (``evaluation.builds.entry``): by age and by total size, least recently used
first; an entry in use (its per-key flock held) is never removed.

The published units of the unit cache (``.units/<key>``, evaluation.builds.units) are entries of the same
budget and the same order: a kernel makes them grow by sending wrappers, so they are counted and
evicted like builds (what a unit compile killed midway left in ``.units/.building`` goes too, once
its key's lock is free).

An entry's last use is the time of its lock file (``BuildDir.lock`` and the unit server touch it). Sizes are counted
by ``lstat`` (no link followed). Callers give the limits (the site: ``EVAL_BUILD_CACHE_MAX_MB`` and
``EVAL_BUILD_CACHE_MAX_AGE_DAYS``, applied by the sweeper); nothing here reads settings.
"""

from __future__ import annotations

import fcntl
import os
import stat
import time
from dataclasses import dataclass

from evaluation.sandbox.safe_files import remove_below

UNITS = ".units"


@dataclass
class Entry:
    key: str
    last_use: float
    bytes: int
    #: The folder holding the entry and its ``.locks``: the cache root, or its ``.units``.
    folder: str = ""


def tree_bytes(path: str) -> int:
    """Bytes of the regular files below ``path`` (links not followed)."""
    total = 0
    for dirpath, _dirnames, filenames in os.walk(path):
        for name in filenames:
            try:
                st = os.lstat(os.path.join(dirpath, name))
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode):
                total += st.st_size
    return total


def entries(cache_root: str) -> list[Entry]:
    """The published entries of a cache, its builds' and its units', least recently used first."""
    found = _entries_in(cache_root) + _entries_in(os.path.join(cache_root, UNITS))
    return sorted(found, key=lambda e: e.last_use)


def _entries_in(cache_root: str) -> list[Entry]:
    out = []
    try:
        names = os.listdir(cache_root)
    except OSError:
        return []
    for name in names:
        path = os.path.join(cache_root, name)
        try:
            st = os.lstat(path)
        except OSError:
            continue
        if name.startswith(".") or not stat.S_ISDIR(st.st_mode):
            continue  # .building, .locks; a link is a build in progress
        try:
            last = os.stat(os.path.join(cache_root, ".locks", name + ".lock")).st_mtime
        except OSError:
            last = st.st_mtime
        out.append(Entry(name, last, tree_bytes(path), cache_root))
    return out


def _remove_unless_busy(cache_root: str, key: str) -> bool:
    try:
        fd = os.open(os.path.join(cache_root, ".locks", key + ".lock"), os.O_CREAT | os.O_RDWR | os.O_CLOEXEC, 0o600)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return False  # in use
    try:
        remove_below(cache_root, [key])  # by descriptors, at any depth
        return not os.path.lexists(os.path.join(cache_root, key))
    finally:
        os.close(fd)  # releases the flock


def evict(cache_root: str, max_total_mb: float | None, max_age_days: float | None,
          now: float | None = None) -> list[str]:
    """Remove entries unused for more than ``max_age_days``, then the least recently used until the
    cache holds at most ``max_total_mb``; returns the keys removed. None: no such limit."""
    now = time.time() if now is None else now
    _remove_dead_unit_builds(os.path.join(cache_root, UNITS))
    found = entries(cache_root)
    total = sum(e.bytes for e in found)
    removed = []
    for e in found:
        too_old = max_age_days is not None and now - e.last_use > max_age_days * 86400
        too_big = max_total_mb is not None and total > max_total_mb * 2**20
        if not (too_old or too_big):
            continue
        if _remove_unless_busy(e.folder or cache_root, e.key):
            removed.append(e.key if e.folder in ("", cache_root) else f"{UNITS}/{e.key}")
            total -= e.bytes
    return removed


def _remove_dead_unit_builds(units_root: str) -> None:
    """``.units/.building/<key>.<pid>.<random>`` whose key's lock is free: a compile killed midway."""
    building = os.path.join(units_root, ".building")
    try:
        names = os.listdir(building)
    except OSError:
        return
    for name in names:
        key = name.split(".", 1)[0]
        try:
            fd = os.open(os.path.join(units_root, ".locks", key + ".lock"), os.O_CREAT | os.O_RDWR | os.O_CLOEXEC,
                         0o600)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            remove_below(building, [name])
        except OSError:
            continue  # its compile is running
        finally:
            os.close(fd)
