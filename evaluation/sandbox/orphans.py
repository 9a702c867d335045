"""The folders of sandboxes whose processes died before they could remove them: found by
the process group that made them, removed by descriptors."""

from __future__ import annotations

import os
import re
import stat
import tempfile
import time
from collections.abc import Callable

from evaluation.sandbox.isolation import work_root
from evaluation.sandbox.safe_files import remove_tree


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
