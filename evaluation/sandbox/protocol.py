"""The typed messages between the parent (evaluation.runner and its phases) and the sandboxed
processes (evaluation.child.harness), one JSON object a line each way.

Requests: the parent builds one of the ``Request`` dataclasses (its ``op`` names the harness's
handler) and sends its ``message()``; the process rebuilds it with ``parse_request`` and hands it
to the handler.

Replies: a process sends one JSON object per request; the parent turns it into one of the ``Reply``
dataclasses with ``parse(ReplyClass, message)``. Every field has a default and a type: a missing
field takes its default, and a field of the wrong type (only a tampered kernel process could send
one) ends the evaluation as ``crashed`` instead of surfacing as an exception deep inside the runner.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar


class MalformedReply(ValueError):
    """A reply whose fields do not have the expected types."""


@dataclass
class Reply:
    """Fields every reply may carry; ``ok`` False means the request failed (``kind``, ``error``)."""

    ok: bool = False
    kind: str = "runtime_error"
    error: str = ""
    traceback: str = ""
    flags: dict[str, str] = field(default_factory=dict)


@dataclass
class ReadyReply(Reply):
    confinement: dict[str, Any] = field(default_factory=dict)
    torch_import_s: float = 0.0
    pid: int = 0


@dataclass
class OpenDeviceReply(Reply):
    device_open_s: float = 0.0
    opened_now: bool = False  # False: an earlier request had opened it


@dataclass
class LoadReply(Reply):
    problem_s: float = 0.0
    import_s: float = 0.0
    init_s: float = 0.0
    environment: dict[str, Any] = field(default_factory=dict)


@dataclass
class CorrectReply(Reply):
    file: str = ""
    ipc_layout: Any = None  # GPU: the layout of the shared buffer whose descriptor was sent (cuda_ipc)
    ipc_error: Any = None  # GPU: why the outputs came as a file instead
    run_s: float = 0.0
    dtypes: list[str] = field(default_factory=list)
    spot: list[list[float]] = field(default_factory=list)


@dataclass
class EstimateReply(Reply):
    input_bytes: int = -1
    param_bytes: int = -1
    output_bytes: int = -1
    device_free_bytes: int = -1  # GPU: the card's free memory as the reference process saw it

    def peak_bytes(self, kernel_role: bool) -> int:
        """A lower bound of one process's peak on the CPU: inputs and outputs (outputs of about the
        inputs' size when unknown), parameters, and in the kernel process the clone of the inputs
        (mutation check) and the copy of the outputs (snapshot); -1 when the inputs are unknown."""
        sets = self.working_set_bytes()
        if sets < 0:
            return -1
        return sets * (2 if kernel_role else 1) + max(self.param_bytes, 0)

    def working_set_bytes(self) -> int:
        """One set of inputs and outputs (outputs of about the inputs' size when unknown); -1 when
        the inputs are unknown."""
        if self.input_bytes < 0:
            return -1
        return self.input_bytes + (self.output_bytes if self.output_bytes >= 0 else self.input_bytes)

    def refusal(self, memory_limit_mb: int, kernel_role: bool) -> str | None:
        """Why the problem cannot run within ``memory_limit_mb`` (None when it may)."""
        peak = self.peak_bytes(kernel_role)
        if peak < 0 or peak / 2**20 <= memory_limit_mb:
            return None
        return (f"the problem's inputs need {self.input_bytes / 2**30:.1f} GB (about {peak / 2**30:.1f} GB per "
                f"process with outputs, parameters and copies), more than memory_limit_mb={memory_limit_mb} allows")


@dataclass
class CompareReply(Reply):
    comparison: dict[str, Any] = field(default_factory=dict)
    fingerprint: list[str] = field(default_factory=list)  # asked for: a digest of each kernel output's bits
    fp64: dict[str, Any] = field(default_factory=dict)  # asked for: errors against an fp64 reference


@dataclass
class InstrumentReply(Reply):
    """What one of the reviewer's instruments measured in a process (evaluation/instruments/)."""

    data: dict[str, Any] = field(default_factory=dict)


@dataclass
class TimeReply(Reply):
    times_ns: list[int] = field(default_factory=list)
    host_ns: list[int] = field(default_factory=list)
    null_host_ns: list[int] = field(default_factory=list)
    spot: list[list[float]] = field(default_factory=list)
    # GPU: the host's time to queue each call's forward (start event to its return), ns.
    dispatch_ns: list[int] = field(default_factory=list)


@dataclass
class DeviceReply(TimeReply):
    """Device-time calls (evaluation/child/timing_requests.py, TimingRequests.device_time): ``host_ns`` holds each call's
    dispatch; ``retries`` the calls made again because their GPU-side wait ran out before the host
    had queued them; ``slack_us`` the last wait; ``queued_ahead`` whether the last call's held."""

    retries: int = 0
    slack_us: float = 0.0
    queued_ahead: bool = True


R = TypeVar("R", bound=Reply)

_SCALARS: dict[type, tuple[type, ...]] = {bool: (bool,), str: (str,), int: (int,), float: (int, float)}


def _coerce(name: str, value: Any, sample: Any) -> Any:
    if sample is None:  # optional field of any JSON type, checked where it is used
        return value
    kind = type(sample)
    if kind in _SCALARS:
        if value is None and kind is str:
            return ""
        if not isinstance(value, _SCALARS[kind]) or (kind is not bool and isinstance(value, bool)):
            raise MalformedReply(f"field {name!r} is {type(value).__name__}, expected {kind.__name__}")
        return kind(value)
    if not isinstance(value, kind):
        raise MalformedReply(f"field {name!r} is {type(value).__name__}, expected {kind.__name__}")
    return value


def parse(cls: type[R], msg: dict[str, Any]) -> R:
    """Build ``cls`` from a child's JSON object (unknown keys ignored, missing keys defaulted)."""
    kwargs: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if f.name not in msg:
            continue
        sample = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
        kwargs[f.name] = _coerce(f.name, msg[f.name], sample)
    reply = cls(**kwargs)
    reply.flags = {str(k): str(v) for k, v in reply.flags.items()}
    return reply


# -- requests (parent -> child) ----------------------------------------------------------------


@dataclass(frozen=True)
class Request:
    """A request to a sandboxed process: ``op`` names the harness's handler, the fields its arguments.
    The parent sends ``message()``; the process rebuilds the request with ``parse_request``."""

    op: ClassVar[str] = ""

    def message(self) -> dict[str, Any]:
        return {"op": self.op, **dataclasses.asdict(self)}


@dataclass(frozen=True)
class EstimateRequest(Request):
    """The problem's input, parameter and output sizes, before the model is built, and on the GPU
    the card's free memory; ``sizes`` False asks for the latter alone (the sizes are known)."""

    op: ClassVar[str] = "estimate"
    sizes: bool = True


@dataclass(frozen=True)
class LoadRequest(Request):
    """Build the model (and, in the kernel process, import the kernel) with ``init_seed``."""

    op: ClassVar[str] = "load"
    init_seed: int = 0
    cpus: list[int] = field(default_factory=list)  # the cores to pin to; none: unpinned
    dtype: str = "float32"


@dataclass(frozen=True)
class BuildRequest(Request):
    """Import the kernel's module in the build process, which compiles what it builds."""

    op: ClassVar[str] = "build"


@dataclass(frozen=True)
class CorrectRequest(Request):
    """One correctness trial on the inputs of ``seed``."""

    op: ClassVar[str] = "correct"
    seed: int = 0
    trial: int = 0
    spot_seed: int | None = None  # spot values of the outputs for the parent's cross-check
    save: bool = False  # the reference writes its outputs to a file (a problem's own check)
    poison: bool = False  # kernel role: memory the call leaves unwritten reads as NaN (evaluation.child.poison)


@dataclass(frozen=True)
class ExportFileRequest(Request):
    """The kernel's outputs of ``trial``, shared in a GPU buffer of ``layout``, written to a file."""

    op: ClassVar[str] = "export_file"
    trial: int = 0
    layout: list[Any] = field(default_factory=list)


@dataclass(frozen=True)
class CompareRequest(Request):
    """The reference compares its last outputs with the kernel's: a shared GPU buffer of
    ``ipc_layout`` (its descriptor passed beside) or the file ``file``."""

    op: ClassVar[str] = "compare"
    atol: float | None = None
    rtol: float | None = None
    scale_check: bool = True
    file: str = ""
    ipc_layout: Any = None
    fingerprint: bool = False  # a digest of each kernel output's bits (the instruments)
    fp64: bool = False  # errors against an fp64 reference (the instruments)


@dataclass(frozen=True)
class InstrumentRequest(Request):
    """One of the reviewer's instruments (evaluation/instruments/): ``what``, with its arguments."""

    op: ClassVar[str] = "instrument"
    what: str = ""
    seed: int = 0
    sizes: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class PrepareRequest(Request):
    """Make the inputs of the next timing request ahead."""

    op: ClassVar[str] = "prepare"
    seeds: list[int] = field(default_factory=list)


@dataclass(frozen=True)
class SettleRequest(Request):
    """Drop what the phases before timing left on the device (outputs kept for comparisons, the
    shared output buffer, the allocator's cached blocks): the processes timed side by side then
    share the card with nothing idle in it."""

    op: ClassVar[str] = "settle"


@dataclass(frozen=True)
class PlaceRequest(Request):
    """New tensor places for a round, and one untimed call on them; with ``keep_places`` the call alone
    (the parent decides for every process of the evaluation alike: evaluation.phases.timing, keeps_places)."""

    op: ClassVar[str] = "place"
    seed: int = 0
    input_seed: int = 0
    keep_places: bool = False


@dataclass(frozen=True)
class TimeRequest(Request):
    """Timed calls, one on the inputs of each seed."""

    op: ClassVar[str] = "time"
    seeds: list[int] = field(default_factory=list)
    spot_seed: int | None = None
    calibrate: bool = False  # also time empty regions (the check call's own overhead)


@dataclass(frozen=True)
class DeviceRequest(Request):
    """Device-time calls behind a GPU-side wait sized by the round's dispatch time."""

    op: ClassVar[str] = "device"
    seeds: list[int] = field(default_factory=list)
    spot_seed: int | None = None
    dispatch_us: float = 0.0


@dataclass(frozen=True)
class OpenDeviceRequest(Request):
    """Open the device (CUDA's context, the timing events, the GPU spin's calibration): asked once the
    evaluation holds the GPU, apart from the start, which only imports torch."""

    op: ClassVar[str] = "open_device"


@dataclass(frozen=True)
class ExitRequest(Request):
    op: ClassVar[str] = "exit"


REQUESTS: dict[str, type[Request]] = {
    cls.op: cls for cls in (EstimateRequest, LoadRequest, BuildRequest, CorrectRequest, ExportFileRequest,
                            CompareRequest, InstrumentRequest, PrepareRequest, SettleRequest, PlaceRequest, TimeRequest,
                            DeviceRequest, OpenDeviceRequest, ExitRequest)
}


def parse_request(msg: dict[str, Any]) -> Request:
    """The request a parent's JSON object stands for (its fields, unknown keys left out); KeyError
    for an unknown op."""
    cls = REQUESTS[str(msg.get("op", ""))]
    names = {f.name for f in dataclasses.fields(cls)}
    return cls(**{k: v for k, v in msg.items() if k in names})
