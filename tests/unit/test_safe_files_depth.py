"""Trees deeper than ``safe_files.MAX_DEPTH`` (a kernel's trap): removed and cleaned by descriptors,
without recursion (Python 3.11's ``shutil.rmtree`` and ``os.walk`` recurse once per level and raise
RecursionError near 1000 levels), and walks that never follow a planted link."""

from __future__ import annotations

import os

from evaluation.builds.stage import _has_library
from evaluation.sandbox.safe_files import MAX_DEPTH, TreePolicy, chown_tree, clean_tree, remove_below, remove_tree

LEVELS = 2000  # twice what Python 3.11 recursion allows


def _nest(path: str, levels: int = LEVELS) -> None:
    """``path/d/d/.../d/f``, ``levels`` folders deep, made through descriptors (a path that long
    cannot be named)."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(levels):
            os.mkdir("d", dir_fd=fd)
            sub = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = sub
        os.close(os.open("f", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd))
        os.symlink("/etc/passwd", "lnk", dir_fd=fd)
    finally:
        os.close(fd)


def test_remove_tree_removes_a_tree_thousands_of_folders_deep(tmp_path):
    top = tmp_path / "sandbox"
    top.mkdir()
    _nest(str(top))
    remove_tree(str(top))
    assert os.listdir(tmp_path) == []


def test_remove_below_removes_a_deep_tree(tmp_path):
    (tmp_path / "entry").mkdir()
    _nest(str(tmp_path / "entry"))
    remove_below(str(tmp_path), ["entry"])
    assert os.listdir(tmp_path) == []


def test_clean_tree_cuts_a_deep_tree_at_the_depth_limit(tmp_path):
    keep = tmp_path / "build" / "ok.so"
    keep.parent.mkdir()
    keep.write_bytes(b"x")
    _nest(str(tmp_path / "build"))
    report = clean_tree(str(tmp_path / "build"), TreePolicy())
    assert any(v == "dir" for v in report.removed.values())
    assert keep.exists()
    depth, fd = 0, os.open(tmp_path / "build", os.O_RDONLY | os.O_DIRECTORY)
    while "d" in os.listdir(fd):  # what is left is at most MAX_DEPTH + 1 folders deep
        sub = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.close(fd)
        fd, depth = sub, depth + 1
    os.close(fd)
    assert depth <= MAX_DEPTH + 1


def test_remove_tree_follows_no_link_and_opens_unreadable_folders(tmp_path):
    victim = tmp_path / "host"
    victim.mkdir()
    (victim / "keep").write_text("host")
    before = os.stat(victim)
    top = tmp_path / "sandbox"
    (top / "a" / "b").mkdir(parents=True)
    (top / "a" / "b" / "to_host").symlink_to(victim)
    os.chmod(top / "a" / "b", 0)
    os.chmod(top / "a", 0)
    remove_tree(str(top))
    assert not top.exists()
    assert (victim / "keep").read_text() == "host"
    after = os.stat(victim)
    assert (after.st_mode, after.st_uid) == (before.st_mode, before.st_uid)


def test_walks_of_a_deep_tree_stop_at_the_depth_limit(tmp_path):
    """``chown_tree`` (``BuildDir.give_to``) and ``_has_library`` walk by descriptors, iteratively,
    no deeper than ``MAX_DEPTH``: a library hidden below it is not seen, and nothing raises."""
    ext = tmp_path / "torch_extensions"
    ext.mkdir()
    _nest(str(ext))
    chown_tree(str(tmp_path), os.geteuid(), os.getegid())
    assert not _has_library(str(tmp_path))
    (ext / "k.so").write_bytes(b"")
    assert _has_library(str(tmp_path))
    remove_tree(str(ext))
