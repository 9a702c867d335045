"""The timing requests a sandboxed process serves (the harness in evaluation.child.harness inherits
them): timed calls on the host's clock and the GPU's events (``time_calls``), the GPU's time alone
behind a wait longer than the process takes to queue the forward (``device_time``), a round's new
tensor places (``place``) and its inputs made ahead (``prepare``).

What these methods read of the harness is declared on the class; the clock and the GPU's timing
objects are the harness's sealed slots (evaluation.child.harness_guard)."""

from __future__ import annotations

import functools
import random
import traceback
from collections.abc import Callable
from typing import Any, NamedTuple

from evaluation.child.clock import perf_counter_ns
from evaluation.child.failures import LazyTensorError, classify_exception, one_line
from evaluation.phases.host_bound import LAUNCH_SLACK_US
from evaluation.sandbox.protocol import DeviceRequest, PlaceRequest, PrepareRequest, SettleRequest, TimeRequest

#: Device time (TimingRequests.device_time): the GPU waits this many times the process's own dispatch time
#: of a forward (plus 50 us) before the start event, at most DEVICE_SLACK_MAX_US; a forward that takes
#: the host longer to queue than that is timed with the rest of its host time in it.
DEVICE_SLACK_FACTOR = 2.0
DEVICE_SLACK_MAX_US = 20_000.0
#: Tries of one device-time call whose GPU-side wait ran out before the host had queued the forward
#: (the wait doubles each time): a wait that ran out lets host time into the events.
DEVICE_TRIES = 4
#: Inputs a process makes ahead of a timing request (TimingRequests.prepare); beyond it, in the request.
PREPARE_BYTES = 256 * 2**20


class TimedCall(NamedTuple):
    """One timed call: the time reported for it (ns; events on the GPU), the host's time around it
    (ns), the host's time to queue the forward (ns; GPU only), whether the GPU was still in its wait
    before the start event when the host had queued the whole forward (GPU only: then the events
    timed the device's work alone), and the outputs."""

    reported_ns: int
    host_ns: int
    dispatch_ns: int
    queued_ahead: bool
    outs: Any


def held_call(call_with_wait: Callable[[float], TimedCall], slack_us: float) -> tuple[TimedCall, float, int]:
    """A device-time call made behind a GPU-side wait of ``slack_us``, made again behind a wait twice
    as long while the wait ran out before the host had queued the forward (DEVICE_TRIES calls at
    most, the wait at most DEVICE_SLACK_MAX_US). Returns the last call, its wait and the retries."""
    call = call_with_wait(slack_us)
    retries = 0
    while not call.queued_ahead and retries + 1 < DEVICE_TRIES and slack_us < DEVICE_SLACK_MAX_US:
        slack_us = min(DEVICE_SLACK_MAX_US, 2 * slack_us)
        retries += 1
        call = call_with_wait(slack_us)
    return call, slack_us, retries


def tensor_bytes(torch: Any, values: list[Any]) -> int:
    return int(sum(x.numel() * x.element_size() for x in values if isinstance(x, torch.Tensor)))


class TimingRequests:
    """The timing half of the harness (evaluation.child.harness.Harness)."""

    # Set by the harness (its __init__, import_torch and load).
    torch: Any
    model: Any
    device: str
    role: str
    disabled: set[str]
    flags: dict[str, str]
    _place_pad: Any
    _first_places: list[Any] | None
    _prepared: dict[int, list[Any]]
    last_outs: Any
    prev_out_ref: Any
    prev_out_ptrs: list[int]
    # Its sealed slots: the clock and the GPU's timing objects.
    timer_fn: Callable[[], int]
    _sync: Callable[[], Any]
    _cuda_sync: Callable[[], None]
    _ev_record: Callable[..., Any]
    _ev_elapsed: Callable[..., float]
    _ev_query: Callable[..., bool]
    _current_stream: Callable[[], Any]
    _ev_start: Any
    _ev_end: Any
    _l2_buf: Any
    _gpu_sleep: Callable[[int], None]
    _empty_cache: Callable[[], None]
    _slack_cycles: int
    # Its methods.
    gen_inputs: Callable[[int], list[Any]]
    _make_inputs: Callable[[int], list[Any]]
    flatten: Callable[[Any], list[Any]]
    _spot: Callable[[list[Any], Any], list[list[float]]]
    take_flags: Callable[[], dict[str, str]]
    check_patches: Callable[[], None]
    _threads: Callable[[], set[Any]]
    _check_threads: Callable[[set[Any]], None]
    _release_shared: Callable[[], None]

    def _call_failed(self, exc: BaseException) -> dict[str, Any]:
        """The reply to a request whose call of the model raised (in an ``except`` block): an output
        that is no finished tensor is the kernel's incorrect answer, anything else fails as its kind."""
        if isinstance(exc, LazyTensorError):
            self.flags["lazy_tensor"] = str(exc)
            return {"ok": False, "kind": "incorrect", "error": str(exc), "traceback": "", "flags": self.take_flags()}
        return {"ok": False, "kind": classify_exception(exc), "error": one_line(exc),
                "traceback": traceback.format_exc(), "flags": self.take_flags()}

    def _timed_call(self, inputs: list[Any], exposed: bool = False, slack_cycles: int | None = None) -> TimedCall:
        """One timed call. ``slack_cycles``: the GPU-side wait before the start event (default
        LAUNCH_SLACK_US)."""
        if self.device == "cuda":
            self._cuda_sync()  # the inputs are made, the GPU idle
            if exposed:
                # The round's check call: the flush is awaited, so nothing the forward starts can
                # run before the start event; the host time over the device-wide sync then shows
                # work on other streams (_check_side_streams), which a slack could otherwise hide.
                self._l2_buf.zero_()
                self._cuda_sync()
                h0 = self.timer_fn()
            else:
                # The L2 flush and a short GPU-side wait are queued with the start event behind
                # them, without the host waiting (KernelBench's harness queues its flush the same
                # way): the host's latency to the forward's first launch, up to LAUNCH_SLACK_US, runs
                # while the GPU is still busy, so the events time the forward's GPU work from its
                # first launch to its last, as the profiler sees it (docs/evaluation.md, "Three
                # judges"); a longer host latency is still counted.
                h0 = self.timer_fn()
                self._l2_buf.zero_()
                self._gpu_sleep(self._slack_cycles if slack_cycles is None else slack_cycles)
            stream = self._current_stream()
            self._ev_record(self._ev_start, stream)
            d0 = perf_counter_ns()
            out = self.model(*inputs)
            outs = self.flatten(out)
            dispatch = perf_counter_ns() - d0
            self._ev_record(self._ev_end, stream)
            # Asked before any wait: a start event not yet reached means the GPU was still in its
            # wait when the whole forward was queued, so no host time can be in the events.
            queued_ahead = not self._ev_query(self._ev_start)
            self._cuda_sync()
            h1 = self.timer_fn()
            ev_ms = self._ev_elapsed(self._ev_start, self._ev_end)
            return TimedCall(int(ev_ms * 1e6), h1 - h0, dispatch, queued_ahead, outs)
        t0 = self.timer_fn()
        out = self.model(*inputs)
        outs = self.flatten(out)
        t1 = self.timer_fn()
        return TimedCall(t1 - t0, t1 - t0, 0, False, outs)

    def _re_place(self, seed: int) -> None:
        """Move the model's tensors and the memory this round allocates to new device addresses.

        On the H200 a ConvTranspose3d forward ran 30 % faster or slower depending on where its
        tensors lay (same cuDNN kernels, other addresses; benchmarks/gpu/ct3d_probe.py), and a
        process keeps its places for life: identical code then read 0.89-1.30 against itself. Drawn
        anew each round, places become noise that the rounds average over, in every process alike.
        The first places stay referenced (a kernel may hold their addresses, e.g. in a CUDA graph)."""
        torch = self.torch
        self._place_pad = None
        modules = list(self.model.modules()) if isinstance(self.model, torch.nn.Module) else []
        if self._first_places is None:
            self._first_places = [t for m in modules for t in (*m._parameters.values(), *m._buffers.values())
                                  if t is not None]
        self._empty_cache()
        rng = random.Random(seed)
        self._place_pad = torch.empty(rng.randint(1, 64) * 2**20 + rng.randint(0, 2047) * 512,
                                      dtype=torch.uint8, device="cuda")
        for m in modules:
            for p in m._parameters.values():
                if p is not None and p.is_cuda:
                    p.data = p.data.clone()
            for name, b in list(m._buffers.items()):
                if b is not None and b.is_cuda:
                    m._buffers[name] = b.clone()

    def settle(self, req: SettleRequest) -> dict[str, Any]:
        """Drop what the correctness phase left on the device before the first timed call. On an
        80 GB card a process of a problem with 8 GB inputs kept its last outputs, the shared copy of
        them and its allocator's cached blocks (some 40 GB) while the other process was timed, and
        the other ran out of memory. The next correctness request (the instruments') keeps outputs
        afresh; the reuse check starts again from it, as the pointers kept are dropped too."""
        self._release_shared()
        self.last_outs = None
        self.prev_out_ref, self.prev_out_ptrs = None, []
        self._prepared = {}
        if self.device == "cuda":
            self._cuda_sync()
            self._empty_cache()
        return {"ok": True}

    def place(self, req: PlaceRequest) -> dict[str, Any]:
        """A round's new places (``_re_place``; not where the parent says to keep them) and one untimed
        call on them, in a request of its own so that the parent's clock around the timing request
        does not see it."""
        if self.device == "cuda" and "placement" not in self.disabled:
            # An exception (the kernel's call failing) becomes the failed reply in main()'s loop.
            if not req.keep_places:
                self._re_place(int(req.seed))
            self._timed_call(self.gen_inputs(int(req.input_seed)))
        return {"ok": True}

    def device_time(self, req: DeviceRequest) -> dict[str, Any]:
        """GPU time of the forward, host dispatch left out: each call is queued behind a GPU-side wait
        longer than this process takes to queue it (DEVICE_SLACK_FACTOR x its dispatch time in the
        round just timed), so the GPU runs the forward's work back to back and the events time the
        device alone. A call whose wait ran out before the host had queued it (the first calls of a
        request dispatch slower than the round's, and a wait counted in clock cycles shortens when
        the GPU clocks up) is made again behind a wait twice as long, up to DEVICE_TRIES times.
        Launch-bound forwards read the same in every process this way, while their timed calls
        (time_calls) carry the host's dispatch, which differs from process to process. Replies the
        events' times, the dispatch times of the calls, the retries, and the last call's spot values."""
        if self.device != "cuda":
            return {"ok": False, "kind": "runtime_error", "error": "device time needs CUDA"}
        dispatch_us = float(req.dispatch_us)
        slack_us = min(DEVICE_SLACK_MAX_US, max(LAUNCH_SLACK_US, DEVICE_SLACK_FACTOR * dispatch_us + 50.0))
        times: list[int] = []
        dispatch: list[int] = []
        retries = 0
        outs: Any = None
        call: TimedCall | None = None
        try:
            for seed in [int(s) for s in req.seeds]:
                outs = None
                call, slack_us, tries = held_call(functools.partial(self._waited_call, seed), slack_us)
                outs = call.outs
                retries += tries
                times.append(call.reported_ns)
                dispatch.append(call.dispatch_ns)
        except BaseException as exc:  # noqa: BLE001
            return {"ok": False, "kind": classify_exception(exc), "error": one_line(exc),
                    "traceback": traceback.format_exc(), "flags": self.take_flags()}
        spot = self._spot(outs, req.spot_seed) if outs is not None else []
        del outs
        self.check_patches()
        if self.role != "kernel":
            self.flags.clear()
        return {"ok": True, "times_ns": times, "host_ns": dispatch, "spot": spot, "retries": retries,
                "slack_us": slack_us, "queued_ahead": call is None or call.queued_ahead, "flags": self.take_flags()}

    def _waited_call(self, seed: int, slack_us: float) -> TimedCall:
        """A timed call on fresh inputs of ``seed`` behind a GPU-side wait of ``slack_us``."""
        cycles = int(self._slack_cycles * slack_us / LAUNCH_SLACK_US)
        return self._timed_call(self.gen_inputs(seed), slack_cycles=cycles)

    def prepare(self, req: PrepareRequest) -> dict[str, Any]:
        """The inputs of the next timing request, made now in a request of their own (up to
        PREPARE_BYTES): the parent's clock around the timing request then sees the calls and little
        else, so that it bounds what this process reports to within a small margin (evaluation.phases.timing)."""
        self._prepared: dict[int, list[Any]] = {}
        budget = PREPARE_BYTES
        if "fresh_inputs" not in self.disabled:
            for seed in dict.fromkeys(int(s) for s in req.seeds):
                inputs = self._make_inputs(seed)
                budget -= max(1, tensor_bytes(self.torch, inputs))
                if budget < 0:
                    break
                self._prepared[seed] = inputs
        self._sync()
        return {"ok": True}

    def time_calls(self, req: TimeRequest) -> dict[str, Any]:
        self._release_shared()  # compared already: the kernel process times with no extra mapping
        seeds = [int(s) for s in req.seeds]
        before = self._threads()
        times: list[int] = []
        host: list[int] = []
        dispatch: list[int] = []
        null_host: list[int] = []
        outs: Any = None
        try:
            for i, seed in enumerate(seeds):
                inputs = self.gen_inputs(seed)
                outs = None
                call = self._timed_call(inputs, exposed=i == len(seeds) - 1)
                outs = call.outs
                times.append(call.reported_ns)
                host.append(call.host_ns)
                dispatch.append(call.dispatch_ns)
                del inputs
            if self.device == "cuda" and req.calibrate:
                for _ in range(5):  # an empty timed region, as the check call (exposed) times it
                    self._l2_buf.zero_()
                    self._cuda_sync()
                    h0 = self.timer_fn()
                    stream = self._current_stream()
                    self._ev_record(self._ev_start, stream)
                    self._ev_record(self._ev_end, stream)
                    self._cuda_sync()
                    null_host.append(self.timer_fn() - h0)
        except BaseException as exc:  # noqa: BLE001
            return self._call_failed(exc)
        spot = self._spot(outs, req.spot_seed) if outs is not None else []
        del outs
        self._check_threads(before)
        self.check_patches()
        if self.role != "kernel":
            self.flags.clear()
        return {"ok": True, "times_ns": times, "host_ns": host, "null_host_ns": null_host, "spot": spot,
                "dispatch_ns": dispatch, "flags": self.take_flags()}
