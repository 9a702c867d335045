"""Determinism: the kernel run twice on the same inputs gives the same outputs, bit for bit.

After the timed rounds the kernel and the reference both run twice on the inputs of one seed; the
reference process (trusted) takes a SHA-256 digest of each kernel output's bytes each time. Two
digests that differ mean the kernel's outputs changed between two runs on the same inputs:
uninitialised reads, races, atomics whose order varies, or noise added on purpose. Atomic float
additions make honest kernels differ in the last bits too; the flag says so, and the record gives
how far apart the two runs' errors against the reference are.
"""

from __future__ import annotations

import hashlib
from typing import Any

CHUNK = 1 << 26  # bytes copied to the host at a time


def fingerprint(torch: Any, outs: list[Any]) -> list[str]:
    """A digest of each output's bytes (its dtype and shape included). Child side: reference process."""
    digests = []
    for o in outs:
        h = hashlib.sha256(f"{o.dtype}{tuple(o.shape)}".encode())
        raw = o.detach().contiguous().reshape(-1).view(torch.uint8)
        for s in range(0, raw.numel(), CHUNK):
            h.update(raw[s:s + CHUNK].cpu().numpy().tobytes())
        digests.append(h.hexdigest())
    return digests


def judge(first: list[str], second: list[str], diffs: tuple[float, float]) -> tuple[dict[str, Any], str | None]:
    """The record of two runs, and the flag's message when their outputs differ."""
    same = bool(first) and first == second
    record: dict[str, Any] = {"runs": 2, "identical": same, "max_abs_diff": [diffs[0], diffs[1]]}
    if same:
        return record, None
    differing = sum(a != b for a, b in zip(first, second, strict=False)) or len(first)
    return record, (f"Two runs on the same inputs gave different outputs ({differing} of {len(first)} output(s) "
                    f"differ in their bits; max abs error against the reference {diffs[0]:.3g} then {diffs[1]:.3g}): "
                    "races, uninitialised memory, order-dependent atomics or added noise.")
