"""Sandbox folders nobody removed: a worker SIGKILLed whole takes its work horse with it, and
nobody is left to remove the horse's `kb-eval-g<pgid>-*` folders (3 of 3 left, two in /dev/shm); a
read-only scratch folder keeps the folder of the evaluation it failed. The sweeper's reaper
(`remove_orphaned_trees`) removes the folders of process groups that are gone, once old enough,
and leaves those whose group still runs."""

from __future__ import annotations

import os
import signal
import time

from evaluation.sandbox.orphans import remove_orphaned_trees, sandbox_prefix
from tests.integration.fault_report import record


def dead_group() -> int:
    """The id of a process group that existed and is gone (a killed work horse's)."""
    pid = os.fork()
    if pid == 0:
        os.setpgrp()
        os.kill(os.getpid(), signal.SIGKILL)
    os.waitpid(pid, 0)
    return pid


def sandbox_folder(root, pgid: int, age_s: float) -> str:
    path = root / f"{sandbox_prefix(pgid)}abc123"
    (path / "src" / "locked").mkdir(parents=True)
    (path / "src" / "out.pt").write_bytes(b"x" * 1024)
    os.chmod(path / "src" / "locked", 0)
    then = time.time() - age_s
    os.utime(path, (then, then))
    return str(path)


def test_the_folders_of_dead_groups_are_removed_and_live_ones_kept(tmp_path, monkeypatch):
    monkeypatch.setenv("KB_WORK_DIR", str(tmp_path))
    dead_old = sandbox_folder(tmp_path, dead_group(), age_s=3600)
    dead_young = sandbox_folder(tmp_path, dead_group(), age_s=5)
    live = sandbox_folder(tmp_path, os.getpgrp(), age_s=3600)  # an evaluation in progress, long-running
    not_ours = tmp_path / "kb-eval-other"
    not_ours.mkdir()

    removed = remove_orphaned_trees(min_age_s=1800)

    # It also sweeps /dev/shm and the temporary folder, where an earlier run killed on this machine
    # may have left folders of its own: only this test's folder count here.
    assert [p for p in removed if p.startswith(str(tmp_path))] == [dead_old]
    assert not os.path.lexists(dead_old)
    assert all(os.path.isdir(p) for p in (dead_young, live, not_ours))
    record("6. sandbox folders left behind", removed="the dead group's (mode-0 folder inside)",
           kept="a live group's, a young dead one's, a folder not named by a group")  # fmt: skip


def test_a_link_named_like_a_sandbox_is_not_followed(tmp_path, monkeypatch):
    work, outside = tmp_path / "work", tmp_path / "outside"
    work.mkdir()
    outside.mkdir()
    (outside / "keep").write_text("not the sandbox's")
    link = work / f"{sandbox_prefix(dead_group())}abc123"
    link.symlink_to(outside)
    os.utime(link, (time.time() - 3600,) * 2, follow_symlinks=False)
    monkeypatch.setenv("KB_WORK_DIR", str(work))
    # (Old enough only for the test's own folders: other suites' young folders in /dev/shm stay.)
    assert remove_orphaned_trees(min_age_s=1800) == []
    assert (outside / "keep").read_text() == "not the sandbox's"
