"""Work budgets measured as operation counts, not wall time (issue 19): how many Python lines a
call executes, stopped as soon as it passes its budget, so a test of a cubic path fails fast
instead of running for minutes; and the issue's hostile payloads, shared by the in-process tests
and the live replay (tests/integration/budget_cases.py)."""

from __future__ import annotations

import io
import struct
import sys
import zlib
from collections.abc import Callable
from typing import Any

# Issue 19, case 9: 200 kernel files of 999 KB each, mostly spaces, about 250 KB zipped.
PADDED_KERNEL = "import torch\n" + " " * (999_000 - 13)


class OverBudget(AssertionError):
    pass


def within_lines(call: Callable[[], Any], budget: int) -> tuple[Any, int]:
    """(what `call` returns, the Python lines it executed); OverBudget once it passes `budget` lines.
    Work done in C (a builtin's loop) is not counted: test that with counting objects instead."""
    executed = 0

    def on_line(frame, event, arg):
        nonlocal executed
        if event == "line":
            executed += 1
            if executed > budget:
                raise OverBudget(f"more than {budget} Python lines executed")
        return on_line

    previous = sys.gettrace()
    sys.settrace(lambda frame, event, arg: on_line)
    try:
        result = call()
    finally:
        sys.settrace(previous)
    return result, executed


def same_member_zip(names: list[str], text: str) -> bytes:
    """A deflated zip of one text under many names, compressed once (zipfile would compress it
    once per name: 200 MB of deflate, most of a minute on a busy machine)."""
    data = text.encode()
    compressor = zlib.compressobj(9, zlib.DEFLATED, -15)
    packed = compressor.compress(data) + compressor.flush()
    crc, out, directory = zlib.crc32(data), io.BytesIO(), []
    for name in names:
        encoded = name.encode()
        sizes = struct.pack("<III", crc, len(packed), len(data))
        directory.append(
            struct.pack("<IHHHHHH", 0x02014B50, 20, 20, 0, 8, 0, 0)
            + sizes
            + struct.pack("<HHHHHII", len(encoded), 0, 0, 0, 0, 0o644 << 16, out.tell())
            + encoded
        )
        out.write(struct.pack("<IHHHHH", 0x04034B50, 20, 0, 8, 0, 0) + sizes + struct.pack("<HH", len(encoded), 0))
        out.write(encoded + packed)
    start = out.tell()
    out.write(b"".join(directory))
    out.write(struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, len(names), len(names), out.tell() - start, start, 0))
    return out.getvalue()


def amplified_run_zip() -> bytes:
    """Issue 19's zip: 200 kernels of PADDED_KERNEL in a run folder."""
    return same_member_zip([f"run/level_1_problem_1_sample_{i}_kernel.py" for i in range(200)], PADDED_KERNEL)
