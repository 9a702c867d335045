"""How often an honest kernel of the field's L1 50 (torch.prod over 256 normals, whose outputs are 0
and a few float32 subnormals) fails the scale check: a product taken left to right in float32 (a naive
kernel's loop) against the product rounded once (what a GPU's torch.prod gives), over 40 draws of the
problem's inputs, under the old rule (every difference counts) and main's (only what lies above
torch.finfo(dtype).tiny). Runs on the CPU:

    .venv/bin/python benchmarks/underflow_scale_check.py
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from evaluation.phases import compare  # noqa: E402

DRAWS = 40


def left_to_right(x: torch.Tensor) -> torch.Tensor:
    out = torch.ones(x.shape[0], x.shape[2])
    for i in range(x.shape[1]):
        out = out * x[:, i, :]
    return out


def rounded_once(x: torch.Tensor) -> torch.Tensor:
    # The CPU's own float32 torch.prod underflows its partial products to 0.
    return torch.prod(x.double(), dim=1).float()


def passes(ref: torch.Tensor, out: torch.Tensor, floor: bool) -> bool:
    kept = compare._subnormal_floor
    if not floor:
        compare._subnormal_floor = lambda torch, dtype: 0.0
    try:
        return compare.compare_outputs([ref], [out], None, None).ok
    finally:
        compare._subnormal_floor = kept


def main() -> None:
    fail_old = fail_new = differ = 0
    for seed in range(DRAWS):
        torch.manual_seed(seed)
        x = torch.randn(16, 256, 256)
        ref, out = rounded_once(x), left_to_right(x)
        differ += bool((ref != out).any())
        fail_old += not passes(ref, out, floor=False)
        fail_new += not passes(ref, out, floor=True)
    print(
        f"{DRAWS} draws of L1 50's inputs: outputs differing in some subnormal {differ}; "
        f"failing the scale check: every difference counted {fail_old}, above finfo.tiny only {fail_new}"
    )


if __name__ == "__main__":
    main()
