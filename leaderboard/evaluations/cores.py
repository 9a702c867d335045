"""Which cores of a GPU host time and which build: the rule of ``python -m evaluation sweep``
(``evaluation.builds.pool.place``) applied to the site's GPU workers and look-ahead builder.

The worker of GPU i (its first ``CUDA_VISIBLE_DEVICES`` entry) times on the host's i-th timing core,
``EVAL_CPUS`` when set (one core per GPU, in GPU order; a single core serves every worker), else
derived from the host's CPU topology; it runs its other processes on the rest of its slice. The
builder gets every core but the timing cores and their SMT siblings. A host without GPUs (dev, CI)
keeps ``EVAL_CPUS`` as it is and pins nothing else. See docs/workers.md, "Cores on a GPU host".
"""

from __future__ import annotations

import functools
import logging
import os

from django.conf import settings

from evaluation.builds.pool import Placement, place
from evaluation.sandbox.limits import host_gpu_count, visible_gpus

log = logging.getLogger(__name__)


@functools.lru_cache(maxsize=1)
def _host_cpus() -> tuple[int, ...]:
    # Read once: a worker pins itself to its slice later, and its forked work horses keep this.
    return tuple(sorted(os.sched_getaffinity(0)))


@functools.lru_cache(maxsize=8)
def _placement(cpus: tuple[int, ...], gpus: int, timing: tuple[int, ...]) -> Placement:
    return place(cpus, gpus, timing=timing or None)


def host_placement() -> Placement | None:
    """This host's split of its cores; None on a host without GPUs."""
    gpus = host_gpu_count()
    if gpus <= 0:
        return None
    return _placement(_host_cpus(), gpus, tuple(settings.EVAL_CPUS))


def gpu_index() -> int | None:
    """The host index of this process's GPU (None when CUDA_VISIBLE_DEVICES names it by UUID)."""
    gpus = visible_gpus()
    if not gpus:
        return 0
    return int(gpus[0]) if gpus[0].isdigit() else None


def timing_cpus(device: str) -> tuple[int, ...]:
    """The cores every timed process of an evaluation on ``device`` ('cpu' or 'cuda') is pinned to."""
    cores = host_placement() if device == "cuda" else None
    index = gpu_index()
    if cores is None:
        return tuple(settings.EVAL_CPUS)
    if not cores.timing or index is None:
        return ()
    return (cores.timing[index % len(cores.timing)],)


def pin_gpu_worker() -> list[int]:
    """Pin this GPU worker (and the work horses and sandboxes it starts) to its slice, off every
    timing core and its siblings; the cores, or [] where nothing is pinned."""
    cores = host_placement()
    index = gpu_index()
    if cores is None or index is None or not cores.timing:
        return []
    others = cores.slices[index % len(cores.slices)]
    if others:
        os.sched_setaffinity(0, others)
        log.info("GPU worker %s: times on core %s, runs on %s", index, timing_cpus("cuda"), others)
    return others


def builder_cpus() -> list[int] | None:
    """The cores the look-ahead builder's pool runs on (None: this process's)."""
    cores = host_placement()
    return cores.builds if cores is not None else None
