"""Issue 28's hostile kernels (cases 2, 3, 4 and 8): each computes the add-one problem correctly and,
at import, attacks the worker's file operations. Shared by tests/adversarial/test_root_file_ops.py
and the replay (tests/integration/sandbox_round3_cases.py)."""

from __future__ import annotations

ADD_ONE_MODEL = """
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x + 1.0
"""

#: Case 2: a process of the kernel swaps its output files for links to ``victim`` in a loop
#: (renameat2 RENAME_EXCHANGE), so that a check by path and a use by path see different files.
SWAPPER = """
import ctypes, os, time
VICTIM = {victim!r}


def _swap():
    rename = ctypes.CDLL(None, use_errno=True).renameat2
    names = [(f"out_{{i}}.pt".encode(), f"lnk_{{i}}".encode()) for i in range(8)]
    for _out, lnk in names:
        try:
            os.symlink(VICTIM, lnk)
        except FileExistsError:
            pass
    end = time.monotonic() + 120
    while time.monotonic() < end:
        for out, lnk in names:
            rename(-100, out, -100, lnk, 2)  # AT_FDCWD, RENAME_EXCHANGE


if os.fork() == 0:
    try:
        _swap()
    finally:
        os._exit(0)
"""

#: Case 3 (and 4): in the build stage (a source that names load_inline; TORCH_EXTENSIONS_DIR is
#: its cache entry's), plant what the root worker used to follow. {tag} keeps the sources apart.
PLANTER = """
# load_inline  {tag}
import os
EXT = os.environ.get("TORCH_EXTENSIONS_DIR", "")
IN_BUILD = os.environ.get("CUDA_VISIBLE_DEVICES") == ""


def _plant():
    os.makedirs(EXT, exist_ok=True)
    {plant}


if EXT:
    try:
        _plant()
    except OSError as exc:
        print("plant failed:", exc)
"""

PLANTS = {
    # a link to a host folder holding "lock": _clean_stale removed <folder>/lock as root
    "link": 'if IN_BUILD:\n        os.symlink({folder!r}, os.path.join(EXT, "lnk"))',
    # a link .ninja_log to a root-only file: ninja_steps read it as root into build_steps_s
    "ninja_log_link": (
        'if IN_BUILD:\n        os.makedirs(os.path.join(EXT, "rd"))\n'
        '        os.symlink({secret!r}, os.path.join(EXT, "rd", ".ninja_log"))'
    ),
    # a FIFO .ninja_log: the worker blocked in open()
    "fifo": 'if IN_BUILD:\n        os.makedirs(os.path.join(EXT, "ff"))\n        os.mkfifo(os.path.join(EXT, "ff", ".ninja_log"))',
    # case 4: a world-writable folder made in the build, 2 MB written in the kernel phase
    "leftovers": (
        'if IN_BUILD:\n        os.mkdir(os.path.join(EXT, "open"))\n'
        '        os.chmod(os.path.join(EXT, "open"), 0o777)\n'
        "    else:\n"
        '        with open(os.path.join(EXT, "kernel_phase.bin"), "wb") as fh:\n'
        '            fh.write(b"x" * 2**21)'
    ),
    # case 4: a build (the build stage's, or the GPU phase's when that one was refused) that leaves
    # more than the entry's budget (3 MB)
    "big": 'with open(os.path.join(EXT, "big.bin"), "wb") as fh:\n        fh.write(b"x" * 3 * 2**20)',
}

#: Case 8: what the kernel can read of the worker's: the reference's log, the cache root's listing.
SNOOPER = """
import os, sys
LEAKED = []
for _what, _try in (("ref-log", lambda: open(os.path.join(os.path.dirname(os.getcwd()), "reference.log")).read()),
                    ("cache-list", lambda: os.listdir(os.path.dirname(os.path.dirname(os.environ["TORCH_EXTENSIONS_DIR"]))))):
    try:
        _try()
        LEAKED.append(_what)
        print(f"SNOOP {{_what}}: read", file=sys.stderr)
    except OSError as exc:
        print(f"SNOOP {{_what}}: denied ({{exc.strerror}})", file=sys.stderr)
# snoop {tag}
"""

#: The snooper's model is correct only when it could read nothing of the worker's.
SNOOPER_MODEL = ADD_ONE_MODEL.replace("return x + 1.0", "return x if LEAKED else x + 1.0")


def swapper(victim: str) -> str:
    return SWAPPER.format(victim=victim) + ADD_ONE_MODEL


def planter(plant: str, tag: str = "", **paths: str) -> str:
    body = PLANTS[plant].format(**paths)
    return PLANTER.format(tag=f"{plant} {tag}", plant=body) + ADD_ONE_MODEL


def snooper(tag: str = "") -> str:
    return SNOOPER.format(tag=tag) + SNOOPER_MODEL
