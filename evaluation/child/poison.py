"""Memory a kernel leaves unwritten reads as a fixed poison while its outputs are checked.

A kernel that allocates its output with ``torch.empty`` and writes only part of it returns whatever
the allocator's recycled block held in the rest. Where the reference is zero there (a product that
underflowed, a mask), that leftover decides the verdict: the same kernel read ``correct`` in one
pass of the field and ``incorrect`` in the next. PyTorch's deterministic mode fills every new
tensor from ``torch.empty``, ``empty_like``, ``empty_strided`` and ``resize_`` (also when a C++/CUDA
extension calls ``at::empty``, or a Triton wrapper ``torch.empty``) with NaN, or an integer's
largest value, so such a kernel fails every time.
"""

from __future__ import annotations

import contextlib
import sys
import warnings
from collections.abc import Iterator
from typing import Any

#: What torch's alerts for nondeterministic operations say in warn-only mode (and its cuBLAS alert):
#: they are the mode's doing, not the kernel's, and would flood the process's log.
ALERT = r"(?s).*use_deterministic_algorithms"


@contextlib.contextmanager
def poison_unwritten(torch: Any) -> Iterator[None]:
    """Within the block, every new tensor from torch's allocator starts as NaN (integers: their
    largest value). Deterministic mode is turned on in warn-only mode, so an operation without a
    deterministic implementation still runs (and its warning is silenced); torch's previous modes
    and the warning filters are back as they were after the block, whatever it raised.

    Memory that does not come from torch's ``empty`` (a raw ``cudaMalloc``, a static buffer) is not
    filled, and code in the block can turn the mode off again."""
    algorithms = torch.are_deterministic_algorithms_enabled()
    warn_only = torch.is_deterministic_algorithms_warn_only_enabled()
    fill = torch.utils.deterministic.fill_uninitialized_memory
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=ALERT)
        try:
            _set_deterministic(torch, True, warn_only=True)
            torch.utils.deterministic.fill_uninitialized_memory = True
            yield
        finally:
            _set_deterministic(torch, algorithms, warn_only=warn_only)
            torch.utils.deterministic.fill_uninitialized_memory = fill


def _set_deterministic(torch: Any, mode: bool, warn_only: bool) -> None:
    """torch's deterministic mode, as ``torch.use_deterministic_algorithms`` sets it, without its
    import: that function first imports ``torch._inductor.config`` (torch.compile's own switch),
    which imports torch._dynamo and Triton: 1.1-1.5 s on the CPU, and about 5 s of every GPU
    evaluation's correctness phase (GPU check run 23), in the first poisoned trial. torch.compile's
    switch is set only where the kernel's process has loaded it (a kernel that compiles); torch.compile
    itself sets it back to the mode after each compile, so it is set on the way out as well."""
    torch._C._set_deterministic_algorithms(mode, warn_only=warn_only)
    inductor = sys.modules.get("torch._inductor.config")
    if inductor is not None:
        setattr(inductor, "deterministic", mode)  # noqa: B010 - its type declares no such attribute
