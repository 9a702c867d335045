"""Public data types of the scoring library: configuration, result, statuses, flag codes.

Nothing here imports torch, so the worker can build configs and read results cheaply.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from typing import Any

from evaluation.sandbox.limits import DEFAULT_MAX_PROCESSES, default_memory_limit_mb

STATUSES: tuple[str, ...] = ("correct", "incorrect", "compile_error", "runtime_error", "timeout", "crashed")

#: Every flag / note code the library emits, with the meaning documented in docs/evaluation.md.
FLAG_CODES: dict[str, str] = {
    "excessive_speedup": "speedup above the review threshold",
    "timing_mismatch": "the kernel process reported times its parent's clock does not bear out",
    "side_stream_work": "GPU work outlived the timed stream (side streams / unsynchronised work)",
    "near_zero_reference": "the reference output is so small that a zero output passes elementwise",
    "input_independent_reference": "the reference output barely depends on the inputs",
    "input_mutation": "the kernel wrote into its inputs",
    "output_reuse": "the kernel returned an input or the same buffer on consecutive calls",
    "patched_timer": "a clock or synchronisation function was replaced by the kernel",
    "lazy_tensor": "the kernel returned something other than a plain torch.Tensor",
    "reference_patched": "torch functions/classes were monkey-patched by the kernel",
    "harness_memory_access": "the kernel scans the garbage collector or interpreter frames",
    "unjoined_thread": "the kernel left Python threads running after returning",
    "timing_output_mismatch": "outputs produced while timing differ from the reference",
    "fallback_to_reference": "ModelNew and all it reaches are the reference's code verbatim",
    "nondeterministic_reference": "the reference gives different outputs for the same inputs",
    "non_finite_reference": "(check-problem) the reference output contains NaN/Inf",
    "forged_reply": "the kernel wrote messages into the harness's reply channel",
    "background_cpu_work": "the kernel process used CPU time while the reference was being timed",
    # The reviewer's instruments (evaluation/instruments/): added only to a correct kernel.
    "precision_downgrade": "an fp32 problem computed in lower precision (TF32, fp16/bf16 casts): its error "
                           "against an fp64 reference is far above the fp32 reference's own",
    "shape_specialised": "correct at the problem's shapes but not at other sizes of the same problem",
    "nondeterministic": "two runs on the same inputs gave different outputs",
    "impossible_speed": "faster than the GPU's peak bandwidth and arithmetic allow for the problem's minimum work",
    "instruments_failed": "the kernel passed correctness and timing, then crashed, hung or was wrong while the "
                          "instruments ran (the verdict stands)",
    # The tolerance's margin, so two evaluations that disagree are explained: on a correct kernel, and
    # on an incorrect one that failed by a hair.
    "near_tolerance": "the error came near the tolerance, under it or over it (two evaluations may disagree)",
}
NOTE_CODES: dict[str, str] = {
    "pytorch_only": "the kernel uses only PyTorch operators (no custom C++/CUDA/Triton code)",
    "try_except_fallback": "the kernel wraps code in try/except (possible fallback to PyTorch)",
    "timing_from_parent_clock": "kernel times were replaced by the parent's clock",
    "timing_retaken": "GPU: the first rounds hid time from the parent's clock; the figures are a second set's",
    "timing_from_host_clock": "GPU event times were replaced by host-clock times over a device sync",
    "isolation_degraded": "some sandbox layer was not available on this host",
    "speedup_uncertain": "the speedup's 95% interval is wide",
    "host_bound": "GPU: the host's dispatch is a large part of a side's time; the interval covers another process",
    "one_reference_process": "GPU: the card could not hold three processes of the problem; one reference process was timed",
}

#: The reviewer's instruments (evaluation/instruments/), run after the timed rounds.
INSTRUMENTS: frozenset[str] = frozenset({"precision", "shapes", "determinism", "speed_of_light", "profile"})
#: Known names: the default ones, and cpu_profile (the profile on a CPU too: off by default, since the
#: profiler's first use imports ~800 modules, 2-15 s, for a profile of little use there).
KNOWN_INSTRUMENTS: frozenset[str] = INSTRUMENTS | {"cpu_profile"}

#: KernelBench's precision option -> the torch dtype the models and floating-point inputs are cast to.
PRECISIONS: dict[str, str] = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}

DEFAULT_TOLERANCES: dict[str, tuple[float, float]] = {
    # dtype name -> (atol, rtol)
    "float32": (1e-4, 1e-4),
    "float64": (1e-6, 1e-6),
    "float16": (1e-2, 1e-2),
    "bfloat16": (1e-2, 1e-2),
}


def default_build_cache_dir() -> str:
    """Build cache root: $KB_BUILD_CACHE, else a per-user directory outside any home directory.

    Homes (e.g. /root) are often mode 0700, which the sandbox's unprivileged uids cannot traverse,
    so the default lives under /var/tmp.
    """
    env = os.environ.get("KB_BUILD_CACHE")
    if env:
        return env
    return os.path.join("/var/tmp", f"kb-build-cache-{os.getuid()}")


@dataclass(frozen=True)
class EarlierTiming:
    """What an earlier evaluation of the same kernel measured, for the instruments run later without
    timing (``timing_trials=0``): they judge these figures as they would the ones just timed (which
    kernels they are for, its speed against the hardware's peaks, whether it goes to review)."""

    speedup: float | None = None
    speedup_interval: tuple[float, float] | None = None
    kernel_ms: float | None = None  # medians
    reference_ms: float | None = None
    flags: tuple[dict[str, str], ...] = ()  # the earlier verdict's flags (a flagged kernel is profiled)

    def apply_to(self, res: EvaluationResult) -> None:
        res.speedup, res.speedup_interval = self.speedup, self.speedup_interval
        res.kernel_ms = None if self.kernel_ms is None else {"median": self.kernel_ms}
        res.reference_ms = None if self.reference_ms is None else {"median": self.reference_ms}
        for flag in self.flags:
            res.add_flag(flag.get("code", ""), flag.get("message", ""))


@dataclass
class EvaluationConfig:
    device: str = "cpu"  # 'cpu' | 'cuda'
    correctness_trials: int = 5
    timing_trials: int = 20  # timed rounds per side (each round = several calls)
    seed: int | None = None  # None: a random secret seed
    timeout_s: float = 300.0  # budget for the whole evaluation of one kernel (build included)
    # Host memory (proportional set size) of each sandboxed process tree; default $EVAL_MEMORY_LIMIT_MB,
    # else from the host's memory and worker count (evaluation.sandbox.limits.default_memory_limit_mb).
    memory_limit_mb: int = field(default_factory=default_memory_limit_mb)
    # Tasks (processes and threads) of each sandboxed process tree (watchdog; RLIMIT_NPROC where it
    # counts only the sandbox's own tasks).
    max_processes: int = DEFAULT_MAX_PROCESSES
    # Largest file a sandboxed process may write (RLIMIT_FSIZE); None: memory_limit_mb.
    file_size_limit_mb: int | None = None
    atol: float | None = None  # None: by output dtype
    rtol: float | None = None
    speedup_flag_threshold: float = 10.0
    size_scale: int = 1  # passed to the children as KB_SCALE
    build_cache_dir: str = field(default_factory=default_build_cache_dir)
    build_entry_max_mb: int = 2048  # a build that leaves more in its cache entry is not published
    # CUDA: the architecture kernels are built for (TORCH_CUDA_ARCH_LIST, e.g. "9.0"); None = the
    # environment's TORCH_CUDA_ARCH_LIST, else the GPU's own (probed once). Part of the build key.
    cuda_arch: str | None = None
    cpu_threads: int | None = None  # torch intra-op threads in the children (None: torch's default)
    warmup_calls: int = 3
    round_target_s: float = 0.02  # aim for this much kernel time per timed round
    max_calls_per_round: int = 50
    hide_paths: tuple[str, ...] = ()  # extra directories hidden from the sandbox (mount namespace)
    # CPU cores the sandboxed processes are pinned to, all of them to the same ones (they take
    # turns): empty = no pinning.
    cpus: tuple[int, ...] = ()
    # Reference processes timed against the kernel: None = 2 on CUDA (the spread between them enters
    # the speedup's interval), 1 on CPU.
    reference_processes: int | None = None
    # Timing rounds are cut down (to 6 at least) so that timing takes about this long; None = no cap.
    timing_budget_s: float | None = 4.0
    # Adaptive stop: timing ends once the 95 % half-width of the per-round log speedup is at most this
    # (relative; None = always the full count), after min_timing_rounds at least; timing_trials (and
    # timing_budget_s) stay the ceiling.
    timing_target_halfwidth: float | None = 0.01
    min_timing_rounds: int = 6
    # CUDA: while the interval is still wider than timing_target_halfwidth after timing_trials
    # rounds, more rounds are taken, up to this many (within timing_budget_s): launch-bound problems,
    # whose rounds are cheap and noisy, get the rounds they need to rank. None: timing_trials is the end.
    max_timing_rounds: int | None = 60
    # KernelBench's precision (PRECISIONS): models and floating-point inputs are cast to it; the
    # tolerances follow the outputs' dtype (1e-4 for fp32, 1e-2 for fp16 and bf16, as KernelBench's).
    precision: str = "fp32"
    # The reviewer's instruments run after the timed rounds (evaluation/instruments/, docs/evaluation.md
    # "Instruments"): any of KNOWN_INSTRUMENTS (the profile runs on a GPU, or on a CPU with cpu_profile).
    instruments: frozenset[str] = INSTRUMENTS
    instruments_budget_s: float = 60.0  # time the instruments may take (their own deadline)
    # Every instrument looks for a way of looking faster than one is; a kernel whose speedup interval
    # lies wholly below this gains nothing from such a trick, and its instruments (about 10 s of the
    # GPU on the H200, most of an evaluation's time there) are recorded as not run, with why.
    # None: the instruments run for every correct kernel.
    instruments_min_speedup: float | None = 1.0
    # Instruments run later than the verdict, without timing (timing_trials=0): the figures of that
    # verdict, judged by the instruments in place of a timing of their own. None: this run's timing.
    earlier_timing: EarlierTiming | None = None
    # Peaks for the speed of light: None = the hardware's (evaluation.instruments.roofline.PEAKS; none
    # known for a CPU), else {"bytes_per_s": .., "flops_per_s": ..} (tests, other hardware).
    peaks: dict[str, float] | None = None
    # A passing kernel whose error reached this share of the tolerance on some element gets
    # near_tolerance_trials more trials before its verdict: near the tolerance, the draw of inputs
    # decides pass or fail.
    near_tolerance_ratio: float = 0.5
    near_tolerance_trials: int = 10
    isolation: str = "auto"  # 'auto' (strongest available) | 'none' (plain child processes)
    # Internal switches used by the adversarial tests to show each defence matters. Never set in
    # production. Known names: fresh_inputs, timer_capture, type_check, scale_check, parent_clock,
    # timing_spot_check, thread_check, torch_patch_check, gc_check, env_scrub, gpu_compare, placement,
    # poison_unwritten.
    disable_defences: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        if self.device not in ("cpu", "cuda"):
            raise ValueError(f"device must be 'cpu' or 'cuda', not {self.device!r}")
        if self.correctness_trials < 1:
            raise ValueError("correctness_trials must be >= 1")
        if self.timing_trials < 0:
            raise ValueError("timing_trials must be >= 0")
        if self.timeout_s <= 0:
            raise ValueError("timeout_s must be > 0")
        if self.memory_limit_mb < 64:
            raise ValueError("memory_limit_mb must be >= 64")
        if self.max_processes < 16:
            raise ValueError("max_processes must be >= 16")
        if self.file_size_limit_mb is not None and self.file_size_limit_mb < 1:
            raise ValueError("file_size_limit_mb must be >= 1")
        if self.size_scale < 1:
            raise ValueError("size_scale must be >= 1")
        if self.precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, not {self.precision!r}")
        if self.min_timing_rounds < 2:
            raise ValueError("min_timing_rounds must be >= 2")
        if self.reference_processes is not None and self.reference_processes not in (1, 2):
            raise ValueError("reference_processes must be 1 or 2")
        self.instruments = _known_instruments(self.instruments)
        self.disable_defences = frozenset(self.disable_defences)
        self.hide_paths = tuple(self.hide_paths)
        self.cpus = tuple(int(c) for c in self.cpus)

    @property
    def n_reference_processes(self) -> int:
        if self.reference_processes is not None:
            return self.reference_processes
        return 2 if self.device == "cuda" else 1


def _known_instruments(names: frozenset[str]) -> frozenset[str]:
    unknown = set(names) - set(KNOWN_INSTRUMENTS)
    if unknown:
        raise ValueError(f"unknown instrument(s): {', '.join(sorted(unknown))}")
    return frozenset(names)


def _msg(code: str, message: str) -> dict[str, str]:
    return {"code": code, "message": message}


@dataclass
class EvaluationResult:
    status: str = "crashed"
    compiled: bool = False
    correct: bool = False
    speedup: float | None = None
    speedup_interval: tuple[float, float] | None = None
    kernel_ms: dict[str, Any] | None = None
    reference_ms: dict[str, Any] | None = None
    max_abs_diff: float | None = None
    max_rel_diff: float | None = None
    trials_passed: int = 0
    trials_total: int = 0
    flags: list[dict[str, str]] = field(default_factory=list)
    notes: list[dict[str, str]] = field(default_factory=list)
    error: str | None = None
    log: str = ""
    timings_s: dict[str, float] = field(default_factory=dict)
    build_cached: bool = False
    backend: str = "torch"
    seed: int | None = None  # only filled when the caller chose the seed (never a secret one)
    environment: dict[str, Any] = field(default_factory=dict)
    # GPU: the device-time speedup (host dispatch left out) and the host-bound rule's findings
    # (evaluation/phases/host_bound.py); None on the CPU or when the kernel was not timed.
    device: dict[str, Any] | None = None
    # What the reviewer's instruments measured, by instrument (evaluation/instruments/).
    instruments: dict[str, Any] = field(default_factory=dict)

    def add_flag(self, code: str, message: str) -> None:
        if not any(f["code"] == code for f in self.flags):
            self.flags.append(_msg(code, message))

    def add_note(self, code: str, message: str) -> None:
        if not any(f["code"] == code for f in self.notes):
            self.notes.append(_msg(code, message))

    @property
    def flag_codes(self) -> list[str]:
        return [f["code"] for f in self.flags]

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        if self.speedup_interval is not None:
            d["speedup_interval"] = [self.speedup_interval[0], self.speedup_interval[1]]
        return d
