"""The device's half of a sandboxed process's setup (evaluation.child.harness.Harness): CUDA's
context, the timing events, the L2 flush buffer and the GPU spin's calibration.

A process imports torch when it starts and opens the device only when its evaluation holds the GPU
(the parent's ``open_device`` request, or whatever request comes first): a process started ahead of
its evaluation (the sweep's next one, a second worker's while the first holds the GPU) touches
nothing on the card that another evaluation is being timed on. The handles taken here are sealed
with the rest of the harness's clock before the kernel is imported (``harness.SEALED``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from evaluation.child.clock import perf_counter_ns
from evaluation.phases.host_bound import LAUNCH_SLACK_US
from evaluation.sandbox.protocol import OpenDeviceRequest


class DeviceSetup:
    """Opens the device once; the harness's ``__init__`` sets the flags and its ``import_torch`` torch."""

    torch: Any
    device: str
    _device_open: bool
    _device_open_s: float
    _opened_now: bool
    _sync: Callable[[], None]

    def open_device(self) -> None:
        """The device's part of the setup: CUDA's context, the events, the L2 flush buffer and the
        GPU spin's calibration. Asked for apart from the import, once the evaluation holds the GPU: a
        process started ahead (another worker's turn, the sweep's next evaluation) imports torch
        beside timed rounds without touching the card they are timed on. Done once; before any of
        the kernel's code runs, whatever request comes first (``_opened_now`` says whether it was
        this one)."""
        self._opened_now = not self._device_open
        if self._device_open:
            return
        self._device_open = True
        t0 = perf_counter_ns()
        self._open_cuda()
        self._device_open_s = (perf_counter_ns() - t0) / 1e9

    def _open_cuda(self) -> None:
        torch = self.torch
        if self.device == "cuda":
            if not torch.cuda.is_available():
                raise RuntimeError("CUDA requested but torch.cuda.is_available() is False in the sandbox")
            torch.cuda.init()
            self._cuda_sync = torch._C._cuda_synchronize
            self._sync = self._cuda_sync
            base = torch._C._CudaEventBase
            self._ev_record = base.record
            self._ev_elapsed = base.elapsed_time
            self._ev_query = base.query
            self._current_stream = torch.cuda.current_stream
            self._ev_start = torch.cuda.Event(enable_timing=True)
            self._ev_end = torch.cuda.Event(enable_timing=True)
            props = torch.cuda.get_device_properties(0)
            l2 = int(getattr(props, "L2_cache_size", 0) or 50 * 2**20)
            self._l2_buf = torch.empty(max(2 * l2, 128 * 2**20), dtype=torch.int8, device="cuda")
            self._gpu_sleep = torch.cuda._sleep
            # The placement's release of cached blocks: taken here, so that a kernel replacing
            # torch._C._cuda_emptyCache cannot keep its own places while the reference's move.
            self._empty_cache = torch._C._cuda_emptyCache
            self._slack_cycles = self._cycles_for(LAUNCH_SLACK_US)

    def open_device_request(self, req: OpenDeviceRequest) -> dict[str, Any]:
        # The loop opened it before this handler, if no request came before: it says which.
        return {"ok": True, "device_open_s": self._device_open_s, "opened_now": self._opened_now}

    def _cycles_for(self, us: float) -> int:
        """GPU clock cycles that ``torch.cuda._sleep`` spins for ``us`` microseconds (measured here).
        The spin counts cycles, so its length follows the GPU's clock: measured on an idle GPU at a
        low clock it lasts a fraction of ``us`` once the timing loop has clocked the GPU up. The GPU
        is kept busy first (about 20 ms), and the fastest probe counts."""
        probe = 200_000
        self._cuda_sync()
        self._gpu_sleep(100 * probe)
        best_ms = math.inf
        for _ in range(3):
            self._cuda_sync()
            self._ev_record(self._ev_start, self._current_stream())
            self._gpu_sleep(probe)
            self._ev_record(self._ev_end, self._current_stream())
            self._cuda_sync()
            best_ms = min(best_ms, self._ev_elapsed(self._ev_start, self._ev_end))
        return int(probe * us / max(best_ms * 1000.0, 1e-3))

