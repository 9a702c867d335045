"""Failures of the host, not of the kernel: they give an evaluation no verdict.

A full scratch disk once turned the reference kernel itself into a `runtime_error` (torch.save of its
outputs failing with "unexpected pos 704 vs 598"). Errors of the host are told apart here: no space
(ENOSPC), a quota (EDQUOT), an I/O error (EIO), a read-only file system (EROFS) on the scratch or
build folders, and a sandbox process that could not start (before any of the kernel's code ran).
An evaluation that meets one ends with status ``INFRASTRUCTURE_ERROR`` (not one of ``STATUSES``,
which are verdicts) and the host's reason in ``error``; the worker retries it later or elsewhere.

A kernel could raise such an error itself to dodge its verdict, so what the kernel's process
reports is believed only when the host confirms it (``confirm``): its folders really are short of
space or fail a write.
"""

from __future__ import annotations

import errno
import os
import re
import shutil
import subprocess
import tempfile

INFRASTRUCTURE_ERROR = "infrastructure_error"

HOST_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EROFS}
# The same errors as the text of exceptions that lost their errno on the way (torch's zip writer
# reports a short write as "PytorchStreamWriter failed ..." / "unexpected pos N vs M").
HOST_ERROR_MARKERS = (
    "No space left on device",
    "Disk quota exceeded",
    "Input/output error",
    "Read-only file system",
    "PytorchStreamWriter failed",
    "unexpected pos",
)
# A folder with less free than this, or where a write of PROBE_BYTES fails, confirms a host error.
# (A write that met ENOSPC filled the disk up to its last block, and its file is still there.)
CONFIRM_FREE_MB = 16
PROBE_BYTES = 1 << 20


def host_error(exc: BaseException) -> str | None:
    """The host's reason if ``exc`` (or an exception it was raised from) is a failure of the host."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, OSError) and current.errno in HOST_ERRNOS:
            where = f" ({current.filename})" if current.filename else ""
            return f"{errno.errorcode[current.errno]}: {current.strerror}{where}"
        text = str(current)
        if any(marker in text for marker in HOST_ERROR_MARKERS):
            return text.strip().splitlines()[-1][:300] if text.strip() else type(current).__name__
        current = current.__cause__ or current.__context__
    return None


# A build killed from outside (the out-of-memory killer, an operator, a builder that died): gcc's
# driver says, on a line of its own, "c++: fatal error: Killed signal terminated program cc1plus"
# (older gcc: "g++: internal compiler error: Killed (program cc1plus)"); subprocess "died with
# <Signals.SIGKILL: 9>"; the sandbox "the build process was killed by signal SIGKILL". A compiler's
# own diagnostic says none: it starts with the file and line ("k.cpp:1:2: error: #error signal
# terminated program x" is the kernel's `#error`, a compile_error). (The line may follow the name
# of the exception that carried it: "RuntimeError: c++: fatal error: ...".)
_KILLED_BUILD = re.compile(
    r"^(?:\w+: )?[\w.+/-]+: fatal error: [\w ]+ signal terminated program \S+$"
    r"|^(?:\w+: )?[\w.+/-]+: internal compiler error: Killed \(program \S+\)$"
    r"|died with <Signals\.SIG\w+: \d+>"
    r"|the build process was killed by signal SIGKILL"
    # Under the root sandbox the build process is PID 1 behind `unshare --fork`, which reports a
    # child killed by a signal as its own exit status 1. The build process catches everything the
    # kernel's module raises (SystemExit included), so such a death is retried, not a verdict.
    r"|the build process exited unexpectedly with status \d+",
    re.MULTILINE,
)
#: How the error of a killed build starts (killed_build's answer, and the build stage's).
KILLED_BUILD = "the build was killed"
#: How a build that timed out while the host was busy with its own work (its shared headers, a load
#: beyond its cores) begins its error: no verdict, retried (evaluation.builds.stage.host_busy).
BUSY_BUILD = "the build timed out while"
#: The same for an evaluation's own phases (loading, correctness, timing): evaluation.runner.
BUSY_EVALUATION = "the evaluation timed out while"


#: How the error of a cached build whose build.ninja torch could not rewrite begins (stale_entry).
STALE_ENTRY = "a cached build made at other paths"
_DENIED_PATH = re.compile(r"PermissionError: \[Errno 13\][^']*'([^']+)'")


def stale_entry(text: str, extensions_dir: str) -> str | None:
    """The host's reason when torch could not rewrite ``build.ninja`` under ``extensions_dir`` (a
    published build entry, lent read-only, whose paths differ from this process's: the build key
    should keep such entries apart, evaluation.builds.entry.key_paths); None otherwise. ``text`` is
    the load's error line. Not the kernel's compile error: no verdict, and, as a kernel could print
    it itself, not the host's failure either (counts_against_host)."""
    found = _DENIED_PATH.search(text) if extensions_dir else None
    if found is None:
        return None
    path = found.group(1)
    if os.path.basename(path) != "build.ninja" or not path.startswith(extensions_dir.rstrip(os.sep) + os.sep):
        return None
    return f"{STALE_ENTRY}: torch could not rewrite {path}"


def killed_build(failure: BaseException | str) -> str | None:
    """The host's reason when a build failed because a compiler, ninja or the build process was
    killed by a signal (never the kernel's ``compile_error``: it is retried and never cached);
    None for a compiler's own diagnostic. ``failure`` is the exception (its causes are read too)
    or the build's text (error line, log, a recorded failure)."""
    texts: list[str] = []
    if isinstance(failure, str):
        texts.append(failure)
    else:
        seen: set[int] = set()
        current: BaseException | None = failure
        while current is not None and id(current) not in seen:
            seen.add(id(current))
            if isinstance(current, subprocess.CalledProcessError) and current.returncode < 0:
                return f"{KILLED_BUILD}: {current}"[:300]
            texts.append(str(current))
            current = current.__cause__ or current.__context__
    for text in texts:
        m = _KILLED_BUILD.search(text)
        if m:
            return f"{KILLED_BUILD}: {m.group(0).strip()}"[:300]
    return None


#: How the error of an evaluation starts whose trusted reference process ran out of the card's memory.
CARD_FULL = "the card ran out of memory"
_DEVICE_OOM = ("CUDA out of memory", "OutOfMemoryError", "CUDA error: out of memory", "CUBLAS_STATUS_ALLOC_FAILED",
               "CUDNN_STATUS_ALLOC_FAILED")


def out_of_device_memory(error: str) -> bool:
    """Whether a process's error line says the GPU's memory ran out (torch's and its libraries' words)."""
    return any(marker in error for marker in _DEVICE_OOM)


def counts_against_host(error: str) -> bool:
    """Whether an infrastructure error (its ``error`` text) counts toward the host's failures in a
    row (the worker's EVAL_HOST_FAILURE_LIMIT). A killed build does not: the kernel's own code runs
    in the build process and can print any compiler's line, kill itself by a signal or ``os._exit``,
    and the host has nothing independent to check it against (a full or read-only disk it does:
    ``confirm`` and the worker's write probe). A killed build is still retried and never cached;
    a kernel that is "killed" on every attempt ends ``failed``, its own loss. Nor does a build that
    timed out while the host was busy with its own work (``BUSY_BUILD``, ``BUSY_EVALUATION``): it
    passes with that work. Nor does a card that ran out of memory (``CARD_FULL``): a kernel that
    fills the card can make the reference run out, and the host is not at fault. Nor a cached build
    torch could not rewrite (``STALE_ENTRY``): its text is the kernel's to print."""
    return not error.startswith((KILLED_BUILD, BUSY_BUILD, BUSY_EVALUATION, CARD_FULL, STALE_ENTRY))


def free_mb(path: str) -> float:
    """MB an unprivileged process may still write where ``path`` is (or would be: a folder not made
    yet is judged by its nearest existing parent)."""
    return shutil.disk_usage(_nearest_existing(path)).free / 2**20


def scratch_root(work_dir: str | None) -> str:
    """The folder per-evaluation directories go to (evaluation.sandbox.isolation.work_root, else $TMPDIR)."""
    return work_dir or tempfile.gettempdir()


def low_space(folders: dict[str, str], floor_mb: float) -> str | None:
    """The first of ``folders`` (label -> path) with less than ``floor_mb`` free, said in words;
    None when all have room. A folder that does not exist yet is judged by its nearest parent."""
    for label, path in folders.items():
        try:
            free = free_mb(path)
        except OSError as exc:
            return f"cannot read the free space of the {label} folder {path}: {exc}"
        if free < floor_mb:
            return f"only {free:.0f} MB free in the {label} folder {path} (floor {floor_mb:.0f} MB)"
    return None


def write_fails(folder: str, nbytes: int = PROBE_BYTES) -> str | None:
    """Whether a write of ``nbytes`` (synced) in ``folder`` fails for a reason of the host; the reason, or None."""
    try:
        fd, path = tempfile.mkstemp(prefix=".kb-space-probe-", dir=folder)
    except OSError as exc:
        return host_error(exc)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(b"\0" * nbytes)
            fh.flush()
            os.fsync(fh.fileno())
    except OSError as exc:
        return host_error(exc)
    finally:
        try:
            os.unlink(path)
        except OSError:
            pass
    return None


def confirm(folders: list[str]) -> str | None:
    """The host's own reason when one of ``folders`` is nearly full (counting only the space an
    unprivileged process may use: root's reserved blocks let the parent write where the sandbox's
    uid cannot) or fails a write now; None when all have room."""
    for folder in folders:
        if not folder or not os.path.isdir(folder):
            continue
        free = free_mb(folder)
        if free < CONFIRM_FREE_MB:
            return f"only {free:.1f} MB free in {folder}"
        reason = write_fails(folder)
        if reason:
            return reason
    return None


def _nearest_existing(path: str) -> str:
    path = os.path.abspath(path)
    while not os.path.exists(path) and os.path.dirname(path) != path:
        path = os.path.dirname(path)
    return path
