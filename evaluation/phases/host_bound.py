"""Two figures per timed kernel on the GPU: KernelBench's (events around each call, the host's
dispatch of the forward partly in them) and the device time (the forward's GPU work alone), and the
rule that says when the first depends on the process that measured it.

On the H200 a launch-bound reference's host dispatch per call ranged 60-174 us across 17 fresh
processes while its GPU work stayed within 0.3 % (shared/findings/host-bound-timing.md). A timed
call hides up to ``LAUNCH_SLACK_US`` of dispatch behind a GPU-side wait (as KernelBench's harness
hides it behind its L2 flush), so its event time is about max(device time, dispatch - slack): where
a process's dispatch stays under the slack the figure is the device time, where another process's
dispatch crosses it the figure jumps (L2 14 read 0.015 ms in one process and 0.103 ms in the next).
Such a side is *host-bound*; its figure gets an interval that covers what another process reads.
"""

from __future__ import annotations

import math
from typing import Any

from evaluation.results.stats import bootstrap_speedup_ci, central, mean_of_pairs, median

#: Host latency to a forward's first launch that a timed call leaves out: the GPU spins this long
#: after the L2 flush before the start event (evaluation/child/harness.py). Host work beyond it is timed.
LAUNCH_SLACK_US = 100.0
#: How much slower another fresh process may dispatch the same forward (the H200's measured range,
#: 60-174 us per call for one reference across 17 processes, is 2.9x).
HOST_SPREAD = 3.0
#: Relative spread of one side's device time between processes, the floor of the device figure's
#: process term (the profiler's sum of kernel times moved at most 0.3 % between processes). Where the
#: two reference processes of an evaluation differ by more, that difference is the term.
DEVICE_PROCESS_REL = 0.005
#: How far the device-time speedup of a pair with a host-bound side moved between processes: the
#: span measured here holds the device's own gaps between launches, and a launch-bound reference
#: timed against itself read 0.957-1.041 on the H200 (15-70 us forwards; GPU acceptance check run 6
#: and the launch self-checks, benchmarks/results/). Such a figure's interval is at least this wide
#: on each side.
DEVICE_HOST_BOUND_SPREAD = 0.05


def side_range(event_ms: float, device_ms: float, dispatch_ms: float) -> tuple[float, float, bool]:
    """(lowest, highest, host_bound): what a process may read for this side under KernelBench's
    timing. Host-bound where a dispatch HOST_SPREAD times slower would no longer hide behind the
    slack and the device work; then a rerun reads anything from the device time (the GPU's floor) to
    that slower dispatch's time."""
    slack_ms = LAUNCH_SLACK_US / 1e3
    if HOST_SPREAD * dispatch_ms <= slack_ms + device_ms:
        return event_ms, event_ms, False
    high = max(event_ms, HOST_SPREAD * dispatch_ms - slack_ms + device_ms)
    return min(event_ms, device_ms), high, True


def report_device_time(res: Any, dev: dict[str, list[float]], dispatch: dict[str, list[float]],
           ref_event: list[float], ker_event: list[float], seed: int) -> None:
    """Fill ``res.device`` (the device-time speedup and its interval, each side's device and dispatch
    time, which sides are host-bound) and, where a side is host-bound, widen ``res.speedup_interval``
    to cover another process's reading, with a ``host_bound`` note saying why."""
    ref_dev = mean_of_pairs(dev["reference"], dev.get("reference2", []))
    ker_dev = dev["kernel"]
    r_dev, k_dev = central(ref_dev), central(ker_dev)
    r_disp, k_disp = _median_of_references(dispatch), median(dispatch["kernel"])
    r_lo, r_hi, r_bound = side_range(central(ref_event), r_dev, r_disp)
    k_lo, k_hi, k_bound = side_range(central(ker_event), k_dev, k_disp)
    device: dict[str, Any] = {
        "reference_ms": r_dev, "kernel_ms": k_dev, "reference_dispatch_ms": r_disp, "kernel_dispatch_ms": k_disp,
        "host_bound": {"reference": r_bound, "kernel": k_bound}, "speedup": None, "speedup_interval": None,
        "busy_share": {"reference": min(1.0, r_dev / max(central(ref_event), 1e-9)),
                       "kernel": min(1.0, k_dev / max(central(ker_event), 1e-9))},
    }
    withheld = _off_gpu_work(r_disp, k_disp, k_dev)
    if withheld:
        device["withheld"] = withheld
    elif k_dev > 0:
        device["speedup"] = r_dev / k_dev
        lo, hi = bootstrap_speedup_ci(ref_dev, ker_dev, seed=seed) if len(ker_dev) >= 2 else (r_dev / k_dev,) * 2
        term = device_process_term(dev, r_bound or k_bound)
        device["speedup_interval"] = [lo * (1 - term), hi * (1 + term)]
        device["process_term"] = term
    device["process_ms"] = {role: central(v) for role, v in dev.items() if v}
    res.device = device
    if (r_bound or k_bound) and res.speedup and res.speedup_interval:
        lo, hi = res.speedup_interval
        res.speedup_interval = (min(lo, r_lo / k_hi), max(hi, r_hi / k_lo))
        sides = " and ".join(s for s, b in (("the reference", r_bound), ("the kernel", k_bound)) if b)
        res.add_note("host_bound", f"The host's dispatch of {sides} is a large part of its time (dispatch "
                                   f"{r_disp:.4f} / {k_disp:.4f} ms, GPU work {r_dev:.4f} / {k_dev:.4f} ms, "
                                   "reference / kernel): another process may read "
                                   f"{res.speedup_interval[0]:.3g}-{res.speedup_interval[1]:.3g}x. "
                                   f"The GPU-time speedup is {_fmt(device['speedup'])}.")


def device_process_term(dev: dict[str, list[float]], host_bound: bool) -> float:
    """Relative widening of the device-time speedup's interval for what another pair of processes
    would read: twice one side's spread (both sides move), measured by the two reference processes
    where they differ by more than DEVICE_PROCESS_REL; at least DEVICE_HOST_BOUND_SPREAD where a side
    is host-bound."""
    spread = DEVICE_PROCESS_REL
    if dev.get("reference") and dev.get("reference2"):
        a, b = central(dev["reference"]), central(dev["reference2"])
        if a > 0 and b > 0:
            spread = max(spread, abs(math.log(a / b)))
    return max(2 * spread, DEVICE_HOST_BOUND_SPREAD if host_bound else 0.0)


def _off_gpu_work(r_disp: float, k_disp: float, k_dev: float) -> str | None:
    """A device time hides what the host does: a kernel that takes the host longer to queue its
    forward than the reference does, and longer than its own GPU work, may be computing off the GPU,
    so it gets no device figure (KernelBench's figure, which counts that time, stands)."""
    if k_disp > max(r_disp, k_dev) * 1.25 + 0.01:
        return (f"the kernel's host time per call ({k_disp:.4f} ms) exceeds the reference's ({r_disp:.4f} ms) "
                f"and its own GPU time ({k_dev:.4f} ms): work off the GPU would not show in a device time")
    return None


def _median_of_references(per_role: dict[str, list[float]]) -> float:
    return median(per_role["reference"] + per_role.get("reference2", []))


def _fmt(speedup: float | None) -> str:
    return "withheld" if speedup is None else f"{speedup:.3g}x"
