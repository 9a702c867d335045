"""A sandboxed process's own confinement, done first thing inside its new namespaces while it is
still root and before torch is imported: the mount masks (hidden folders, re-exposed paths, private
/tmp), the rlimits, its work folder, its unprivileged uid and gid, and no_new_privs. Also run before
a confined compiler is exec'ed (evaluation.sandbox.sandbox.COMMAND_BOOT)."""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import resource
from typing import Any

MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_REMOUNT = 32
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


def _mount(libc: ctypes.CDLL, src: str | None, target: str, fstype: str | None, flags: int, data: str | None) -> None:
    r = libc.mount(
        src.encode() if src else None,
        target.encode(),
        fstype.encode() if fstype else None,
        ctypes.c_ulong(flags),
        data.encode() if data else None,
    )
    if r != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mount {src} -> {target}: {os.strerror(err)}")


def _apply_masks(masks: list[list[Any]]) -> None:
    """Cover each masked directory, re-exposing only the listed paths below it.

    Each mask is [directory, [exposed paths...], source]: source None covers the directory with an
    empty tmpfs (mode 0755, root's: the sandbox's uid cannot write it); a source path is bind-mounted
    over it instead (the process's own /tmp; a file over a file: /etc/passwd); a source
    ``{"options", "folders", "uid"}`` mounts a tmpfs of its own with those options and makes the
    folders in it (the process's temporary folders, bounded in size: tmpfs is memory). Exposed paths are opened (O_PATH) before the directory
    is covered and bind-mounted back from those descriptors, so they are reachable even when they
    live below a covered directory. Only this process's private mount namespace is affected.
    """
    libc = _libc()
    _mount(libc, None, "/", None, MS_REC | MS_PRIVATE, None)
    for directory, exposed, source in masks:
        if not os.path.exists(directory):
            continue
        held = []
        for path in exposed:
            try:
                held.append((path, os.open(path, os.O_PATH | os.O_CLOEXEC)))
            except OSError:
                continue
        if source is None:
            _mount(libc, "tmpfs", directory, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=16m")
        elif isinstance(source, dict):  # the process's temporary folders: one tmpfs of a bounded size
            _mount(libc, "tmpfs", directory, "tmpfs", MS_NOSUID | MS_NODEV, source["options"])
            for name in source["folders"]:
                os.mkdir(os.path.join(directory, name), 0o700)
                if source.get("uid") is not None:
                    os.chown(os.path.join(directory, name), source["uid"], source["uid"])
        else:
            _mount(libc, source, directory, None, MS_BIND | MS_REC, None)
        for path, fd in held:
            if os.path.isdir(f"/proc/self/fd/{fd}"):
                os.makedirs(path, exist_ok=True)
            else:
                os.makedirs(os.path.dirname(path), exist_ok=True)
                open(path, "a").close()
            _mount(libc, f"/proc/self/fd/{fd}", path, None, MS_BIND | MS_REC, None)
            os.close(fd)


def confine(spec: dict[str, Any]) -> dict[str, Any]:
    done: dict[str, Any] = {"filesystem_isolated": False, "uid": os.getuid(), "no_new_privs": False}
    if spec.get("masks") and os.geteuid() == 0:
        try:
            _apply_masks(spec["masks"])
            done["filesystem_isolated"] = True
        except OSError as exc:
            done["mask_error"] = str(exc)
    rl = spec.get("rlimits", {})
    for name, value in rl.items():
        res = getattr(resource, name)
        try:
            resource.setrlimit(res, (value, value))
        except (ValueError, OSError) as exc:
            done.setdefault("rlimit_errors", []).append(f"{name}: {exc}")
    os.chdir(spec["workdir"])
    uid, gid = spec.get("uid"), spec.get("gid")
    if uid is not None and gid is not None and os.geteuid() == 0:
        os.setgroups([])
        os.setresgid(gid, gid, gid)
        os.setresuid(uid, uid, uid)
        done["uid"] = os.getuid()
        if os.getuid() == 0 or os.geteuid() == 0:
            raise SystemExit("failed to drop privileges")
    try:
        PR_SET_NO_NEW_PRIVS = 38
        if _libc().prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0:
            done["no_new_privs"] = True
    except OSError:
        pass
    return done
