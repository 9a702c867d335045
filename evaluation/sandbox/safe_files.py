"""File operations the worker (often root) makes on what sandboxed processes can write: by
descriptor, never by a path they can change.

Everything a kernel's processes could write (their work directories, a build-cache entry while it
is built or used) is hostile: between a check and a use, a name can turn into a symbolic link to a
host file, a FIFO that blocks an ``open`` for ever, or a device. So:

* a file is opened with ``O_NOFOLLOW | O_NONBLOCK``, checked on its descriptor (``fstat``: a
  regular file, its size, its owner) and used through it (``fchown``, ``fchmod``, a read with a
  size cap): ``open_regular``, ``read_capped``, ``read_below``;
* an output file changes hands by ``take_over``: opened and checked, renamed, and given away only
  if the very file checked is what landed (by device and inode);
* a tree is walked by directory descriptors with ``lstat``, never through a link
  (``clean_tree``): links, FIFOs, sockets and devices are removed, not followed; files and folders
  are given to an owner and a mode through their descriptors; a size budget is counted as it goes;
* a tree is removed the same way (``remove_tree``), a folder made unreadable opened up through a
  descriptor of that very folder;
* no walk recurses in Python per level (a kernel may nest thousands of folders): an explicit stack
  of at most ``MAX_DEPTH + 1`` descriptors; removal goes deeper by renaming a folder found below
  ``MAX_DEPTH`` up into the folder being emptied (``empty_folder``); other walks stop there.
"""

from __future__ import annotations

import errno
import json
import os
import stat
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

#: Opening a file someone else may have planted: never through a link, never blocking on a FIFO.
READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
#: Deeper than this, a tree is a kernel's trap, not a build.
MAX_DEPTH = 32


class UnsafeFile(Exception):
    """A name that is not the regular file it must be (a link, a FIFO, a device, too big, swapped)."""


def open_regular(name: str, dir_fd: int | None = None, max_bytes: int | None = None,
                 owner: int | None = None) -> int:
    """A descriptor of the regular file ``name`` (relative to ``dir_fd``), refusing anything else,
    a file over ``max_bytes``, one with other names (hard links) and, with ``owner``, one of another uid."""
    try:
        fd = os.open(name, READ_FLAGS, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # the last component is a symbolic link
            raise UnsafeFile(f"{name!r} is a symbolic link") from exc
        raise
    st = os.fstat(fd)
    why = None
    if not stat.S_ISREG(st.st_mode):
        why = "is not a regular file"
    elif max_bytes is not None and st.st_size > max_bytes:
        why = f"is larger than {max_bytes} bytes"
    elif st.st_nlink != 1:
        why = "has other names (hard links)"
    elif owner is not None and st.st_uid != owner:
        why = "belongs to another uid"
    if why:
        os.close(fd)
        raise UnsafeFile(f"{name!r} {why}")
    return fd


def read_capped(name: str, max_bytes: int, dir_fd: int | None = None) -> bytes:
    """The contents of the regular file ``name``, at most ``max_bytes`` (else ``UnsafeFile``)."""
    fd = open_regular(name, dir_fd, max_bytes)
    try:
        chunks, total = [], 0
        while True:
            chunk = os.read(fd, min(1 << 20, max_bytes + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if total > max_bytes:  # it grew after the fstat
                raise UnsafeFile(f"{name!r} is larger than {max_bytes} bytes")
        return b"".join(chunks)
    finally:
        os.close(fd)


def open_dir_below(root: str, parts: list[str]) -> int:
    """A descriptor of ``root/parts[0]/parts[1]/...``; ``root`` is trusted (made by the worker), each
    part below it is opened without following a link."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for part in parts:
            if not part or part in (".", "..") or "/" in part:
                raise UnsafeFile(f"invalid path component {part!r}")
            sub = os.open(part, DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = sub
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_below(root: str, parts: list[str], max_bytes: int) -> bytes | None:
    """The file ``root/parts...`` read through descriptors (no link followed, no FIFO opened,
    at most ``max_bytes``), or None when it is absent or not a plain file."""
    try:
        fd = open_dir_below(root, parts[:-1])
    except (OSError, UnsafeFile):
        return None
    try:
        return read_capped(parts[-1], max_bytes, fd)
    except (OSError, UnsafeFile):
        return None
    finally:
        os.close(fd)


def subdirectories(root: str, parts: list[str]) -> list[str]:
    """Names of the real folders (not links) in ``root/parts...``; [] when it is not a real folder."""
    try:
        fd = open_dir_below(root, parts)
    except (OSError, UnsafeFile):
        return []
    try:
        with os.scandir(fd) as it:
            return sorted(e.name for e in it if e.is_dir(follow_symlinks=False))
    finally:
        os.close(fd)


def remove_name(dir_fd: int, name: str) -> None:
    """Remove ``name`` in the folder ``dir_fd`` whatever it is; a folder with all it holds, at any
    depth, by descriptors, never through a link (``empty_folder``)."""
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return
    if not stat.S_ISDIR(st.st_mode):
        os.unlink(name, dir_fd=dir_fd)
        return
    try:
        fd = _open_dir_for_removal(dir_fd, name)
    except (UnsafeFile, OSError) as exc:
        if isinstance(exc, OSError) and exc.errno not in (errno.ELOOP, errno.ENOTDIR):
            raise
        os.unlink(name, dir_fd=dir_fd)  # no longer a folder (a link, a file): removed as it is now
        return
    try:
        empty_folder(fd)
    finally:
        os.close(fd)
    try:
        os.rmdir(name, dir_fd=dir_fd)
    except OSError:
        pass  # best effort, as before: what a live process added stays


def remove_below(root: str, parts: list[str]) -> None:
    """Remove ``root/parts...`` (a file, a link, a FIFO or a tree), never following a link on the way."""
    try:
        fd = open_dir_below(root, parts[:-1])
    except (OSError, UnsafeFile):
        return
    try:
        remove_name(fd, parts[-1])
    except (OSError, UnsafeFile):
        pass
    finally:
        os.close(fd)


def write_new(directory: str, name: str, data: bytes, mode: int = 0o644) -> None:
    """Write ``directory/name`` as a new file (whatever had that name is removed first; never
    through a link, never into a FIFO)."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        remove_name(fd, name)
        out = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=fd)
        try:
            os.write(out, data)
            os.fchmod(out, mode)
        finally:
            os.close(out)
    finally:
        os.close(fd)


def read_json(path: str, max_bytes: int = 1 << 16) -> dict[str, Any]:
    """A small JSON object the parent keeps in a folder of its own (never through a link); {} for
    anything else: missing, unreadable, too long, not an object."""
    try:
        data = json.loads(read_capped(path, max_bytes))
    except (OSError, ValueError, UnsafeFile):
        return {}
    return data if isinstance(data, dict) else {}


def replace_json(path: str, data: dict[str, Any]) -> None:
    """Write ``data`` to ``path`` at once (a temporary file renamed over it, mode 0644); a failure
    leaves what was there (whoever reads it next finds it again)."""
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", dir=os.path.dirname(path))
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(data, fh)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except OSError:
        pass


def take_over(src_dir: str, name: str, dst_dir: str, new_name: str, uid: int | None,
              owner: int | None, max_bytes: int | None = None) -> None:
    """Move the regular file ``src_dir/name`` (the sending process's, ``owner``'s when uids are
    switched) to ``dst_dir/new_name`` and give it to ``uid`` with mode 0600.

    The sender may swap the name for a link or another file at any moment: the file is opened and
    checked first, and given away (``fchown``/``fchmod`` on that descriptor) only if the very file
    checked is what the rename brought over; anything else that landed is removed."""
    fd = open_regular(os.path.join(src_dir, name), max_bytes=max_bytes, owner=owner)
    try:
        checked = os.fstat(fd)
        target = os.path.join(dst_dir, new_name)
        os.rename(os.path.join(src_dir, name), target)
        landed = os.stat(target, follow_symlinks=False)
        if (landed.st_dev, landed.st_ino) != (checked.st_dev, checked.st_ino):
            dst_fd = os.open(dst_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            try:
                remove_name(dst_fd, new_name)
            finally:
                os.close(dst_fd)
            raise UnsafeFile(f"{name!r} was swapped for another file while it was taken over")
        if uid is not None:
            os.fchown(fd, uid, uid)
        os.fchmod(fd, 0o600)
    finally:
        os.close(fd)


@dataclass
class TreeReport:
    """What ``clean_tree`` found: bytes kept, and what it removed (path below the root: why)."""

    bytes: int = 0
    files: int = 0
    removed: dict[str, str] = field(default_factory=dict)
    over_budget: bool = False


@dataclass
class TreePolicy:
    """What ``clean_tree`` keeps and how: the owner it gives what it keeps (None: leave it), folder
    mode, file mode (0o755 where the file was executable), a filter on what to keep (``lstat``
    result -> keep), and a budget in bytes."""

    uid: int | None = None
    gid: int | None = None
    dir_mode: int = 0o755
    file_mode: int = 0o644
    keep: Callable[[os.stat_result], bool] = lambda st: True
    max_bytes: int | None = None


def clean_tree(path: str, policy: TreePolicy) -> TreeReport:
    """Walk the folder ``path`` by descriptors: remove links, FIFOs, sockets, devices, what
    ``policy.keep`` refuses and what lies deeper than ``MAX_DEPTH``; give each folder and file kept
    ``policy``'s owner and mode (set-id bits dropped). ``path`` itself is trusted (the worker made it)."""
    report = TreeReport()
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        _clean_dir(fd, "", policy, report, 0)
    finally:
        os.close(fd)
    return report


def _clean_dir(dfd: int, rel: str, policy: TreePolicy, report: TreeReport, depth: int) -> None:
    with os.scandir(dfd) as it:
        entries = list(it)
    for entry in entries:
        where = f"{rel}{entry.name}"
        try:
            st = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        kind = _kind(st)
        if kind is None or not policy.keep(st) or (kind == "dir" and depth >= MAX_DEPTH):
            report.removed[where] = kind or stat.filemode(st.st_mode)
            try:
                remove_name(dfd, entry.name)
            except OSError:
                pass
            continue
        try:
            _keep(dfd, entry.name, st, kind, where, policy, report, depth)
        except (OSError, UnsafeFile) as exc:  # changed under us: not kept
            report.removed[where] = f"changed while walked: {exc}"
            try:
                remove_name(dfd, entry.name)
            except OSError:
                pass


def _kind(st: os.stat_result) -> str | None:
    if stat.S_ISDIR(st.st_mode):
        return "dir"
    if stat.S_ISREG(st.st_mode):
        return "file"
    return None  # a link, a FIFO, a socket, a device


def _keep(dfd: int, name: str, st: os.stat_result, kind: str, where: str, policy: TreePolicy,
          report: TreeReport, depth: int) -> None:
    fd = os.open(name, DIR_FLAGS if kind == "dir" else READ_FLAGS, dir_fd=dfd)
    try:
        now = os.fstat(fd)
        if (now.st_dev, now.st_ino) != (st.st_dev, st.st_ino):
            raise UnsafeFile("swapped")
        if kind == "dir":
            _clean_dir(fd, where + "/", policy, report, depth + 1)
            mode = policy.dir_mode
        else:
            if now.st_nlink != 1:
                raise UnsafeFile("has other names (hard links)")
            report.files += 1
            report.bytes += now.st_size
            if policy.max_bytes is not None and report.bytes > policy.max_bytes:
                report.over_budget = True
            mode = policy.file_mode | (0o111 if now.st_mode & stat.S_IXUSR else 0)
        if policy.uid is not None:
            os.fchown(fd, policy.uid, policy.gid if policy.gid is not None else policy.uid)
        os.fchmod(fd, mode)
    finally:
        os.close(fd)


def remove_tree(path: str) -> None:
    """Remove the folder ``path`` (trusted: the worker made it) and all it holds, by descriptors,
    never through a link, at any depth, while a kernel's processes may still be changing it. A
    folder its owner made unreadable (mode 0) is opened up first through an ``O_PATH`` descriptor
    of that very folder. Best effort: what cannot be removed stays; never raises."""
    parent, name = os.path.split(os.path.abspath(path))
    remove_below(parent, [name])


def empty_folder(top: int) -> None:
    """Remove everything in the folder ``top`` (a descriptor), by descriptors, never through a link,
    without recursion: an explicit stack of folder descriptors, at most ``MAX_DEPTH`` deep. A folder
    found deeper is first renamed up into ``top`` under a new name (a rename between two
    descriptors of one file system) and emptied from there, so any depth takes at most
    ``MAX_DEPTH + 1`` descriptors and no Python recursion. Best effort: what cannot be removed stays."""
    stack: list[tuple[int, str, list[str]]] = [(top, "", _names(top))]
    try:
        while stack:
            fd, _, names = stack[-1]
            if not names:
                _leave(stack)
                continue
            name = names.pop()
            try:
                st = os.stat(name, dir_fd=fd, follow_symlinks=False)
                if not stat.S_ISDIR(st.st_mode):
                    os.unlink(name, dir_fd=fd)
                elif len(stack) > MAX_DEPTH:
                    moved = f".kb-deep-{os.urandom(8).hex()}"
                    os.rename(name, moved, src_dir_fd=fd, dst_dir_fd=top)
                    stack[0][2].append(moved)
                else:
                    stack.append(_enter(fd, name))
            except (OSError, UnsafeFile):
                continue
    finally:
        for fd, _, _ in stack[1:]:
            os.close(fd)


def _names(fd: int) -> list[str]:
    with os.scandir(fd) as it:
        return [e.name for e in it]


def _enter(dfd: int, name: str) -> tuple[int, str, list[str]]:
    fd = _open_dir_for_removal(dfd, name)
    try:
        return fd, name, _names(fd)
    except BaseException:
        os.close(fd)
        raise


def _leave(stack: list[tuple[int, str, list[str]]]) -> None:
    """Done with the folder on top of ``stack``: closed and removed from its parent (not ``top``)."""
    fd, name, _ = stack.pop()
    if not stack:
        return
    os.close(fd)
    try:
        os.rmdir(name, dir_fd=stack[-1][0])
    except OSError:
        pass


def _open_dir_for_removal(dfd: int, name: str) -> int:
    """A descriptor of the folder ``name`` in ``dfd`` (never a link), its mode made 0700 so that
    what it holds can be removed."""
    try:
        fd = os.open(name, DIR_FLAGS, dir_fd=dfd)
    except PermissionError:
        pfd = os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dfd)
        try:
            if not stat.S_ISDIR(os.fstat(pfd).st_mode):
                raise UnsafeFile(f"{name!r} is not a folder") from None
            os.chmod(f"/proc/self/fd/{pfd}", 0o700)  # the folder the descriptor holds, whatever the name is now
        finally:
            os.close(pfd)
        fd = os.open(name, DIR_FLAGS, dir_fd=dfd)
    try:
        os.fchmod(fd, 0o700)
    except OSError:
        pass
    return fd


def walk_tree(top: int, visit: Callable[[int, str, os.stat_result], int | None]) -> None:
    """Call ``visit(dir_fd, name, lstat)`` for each entry below the folder ``top`` (a descriptor),
    without recursion (an explicit stack of descriptors). ``visit`` returns a descriptor of the folder
    ``name`` to walk into (this walk closes it) or None. Nothing deeper than ``MAX_DEPTH`` folders is
    visited: at most ``MAX_DEPTH + 1`` descriptors are open. An entry gone or changed is skipped."""
    stack: list[tuple[int, list[str]]] = [(top, _names(top))]
    try:
        while stack:
            fd, names = stack[-1]
            if not names:
                stack.pop()
                if stack:  # ``top`` is the caller's
                    os.close(fd)
                continue
            name = names.pop()
            try:
                sub = visit(fd, name, os.stat(name, dir_fd=fd, follow_symlinks=False))
            except (OSError, UnsafeFile):
                continue
            if sub is None:
                continue
            if len(stack) > MAX_DEPTH:
                os.close(sub)
                continue
            try:
                stack.append((sub, _names(sub)))
            except OSError:
                os.close(sub)
    finally:
        for fd, _ in stack[1:]:
            os.close(fd)


def open_checked(dir_fd: int, name: str, st: os.stat_result) -> int | None:
    """A descriptor of ``name`` in ``dir_fd``, the very folder or single-named regular file ``st``
    (an ``lstat``) describes, opened without following a link or blocking on a FIFO; None for
    anything else (a link, a FIFO, a socket, a device); ``UnsafeFile`` when it changed meanwhile."""
    kind = _kind(st)
    if kind is None:
        return None
    fd = os.open(name, DIR_FLAGS if kind == "dir" else READ_FLAGS, dir_fd=dir_fd)
    now = os.fstat(fd)
    if (now.st_dev, now.st_ino) != (st.st_dev, st.st_ino) or (kind == "file" and now.st_nlink != 1):
        os.close(fd)
        raise UnsafeFile(f"{name!r} changed while walked")
    return fd


def chown_tree(path: str, uid: int, gid: int) -> None:
    """Give the folder ``path`` (trusted: the worker made it) and the folders and regular files below
    it to ``uid:gid`` by descriptors (``walk_tree``, ``open_checked``, ``fchown``): links, FIFOs,
    sockets, devices and files with other names (hard links) are left as they are, never followed;
    nothing deeper than ``MAX_DEPTH`` is walked. Best effort."""
    def visit(dir_fd: int, name: str, st: os.stat_result) -> int | None:
        fd = open_checked(dir_fd, name, st)
        if fd is None:
            return None
        try:
            os.fchown(fd, uid, gid)
        except BaseException:
            os.close(fd)
            raise
        if stat.S_ISDIR(st.st_mode):
            return fd
        os.close(fd)
        return None

    top = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fchown(top, uid, gid)
        walk_tree(top, visit)
    finally:
        os.close(top)
