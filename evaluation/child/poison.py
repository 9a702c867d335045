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
            torch.use_deterministic_algorithms(True, warn_only=True)
            torch.utils.deterministic.fill_uninitialized_memory = True
            yield
        finally:
            torch.use_deterministic_algorithms(algorithms, warn_only=warn_only)
            torch.utils.deterministic.fill_uninitialized_memory = fill
