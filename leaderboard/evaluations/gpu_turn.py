"""Workers that share one GPU take turns on it: one evaluation at a time uses the device, while the
next worker's evaluation has its sandboxed processes started (each imports torch: about 2.4 s on the
H200 host, half of a launch-bound kernel's evaluation) and waits for its turn.

A turn is an exclusive `flock` on a file named after the GPU, in a folder of the site's private
`VAR_DIR` (hidden from kernels, so no kernel can take the GPU's turn). The kernel releases a lock
whose holder dies, so a killed work horse never leaves the GPU taken. `EVAL_WORKERS_PER_GPU` (1 by
default) sets how many workers `evalworker` runs per GPU; with one, nothing waits and nothing is
locked. On the CPU each worker has its own cores and no turn is taken.

Evaluations come first: each holds a second file, `want`, shared while it waits for the turn and
holds it; a follow-up (the instruments run after a verdict) takes the turn only while no evaluation
holds `want`, and gives it up between the instruments' steps while one does (`FollowUpTurn`).
"""

from __future__ import annotations

import fcntl
import os
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial

from django.conf import settings

from evaluation import EvaluationConfig, EvaluationResult, evaluate
from evaluation.sandbox.limits import visible_gpus

#: Where the turns' lock files are (one per GPU of the host).
TURNS_FOLDER = "gpu-turns"


def turns_folder(var_dir: str) -> str:
    """The folder of the turns' lock files, made again if it was removed (a stat when it exists)."""
    folder = os.path.join(var_dir, TURNS_FOLDER)
    os.makedirs(folder, mode=0o700, exist_ok=True)
    return folder


def turn_path(gpu: str, kind: str = "lock") -> str:
    """The lock file of a GPU, named by its index or UUID as CUDA_VISIBLE_DEVICES gives it; `want`
    for the file an evaluation holds shared while it wants or holds the turn."""
    return os.path.join(turns_folder(settings.VAR_DIR), "gpu-" + re.sub(r"[^A-Za-z0-9._-]", "_", gpu) + "." + kind)


def _open(path: str) -> int:
    return os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)


def this_gpu() -> str:
    """The GPU this worker evaluates on: the first it can see (its only one under `evalworker`)."""
    gpus = visible_gpus()
    return gpus[0] if gpus else "0"


@contextmanager
def gpu_turn(gpu: str, waited: list[float] | None = None) -> Iterator[None]:
    """Hold the GPU's turn for the block; `waited` gets the seconds spent waiting for it. An
    evaluation: it says it wants the turn first, so that a follow-up holding it gives it up."""
    want = _open(turn_path(gpu, "want"))
    try:
        fcntl.flock(want, fcntl.LOCK_SH)
        fd = _open(turn_path(gpu))
        try:
            t0 = time.monotonic()
            fcntl.flock(fd, fcntl.LOCK_EX)
            if waited is not None:
                waited.append(time.monotonic() - t0)
            yield
        finally:
            os.close(fd)  # releases the lock
    finally:
        os.close(want)


class FollowUpTurn:
    """The turn of a follow-up (the instruments run after a verdict): below every evaluation. It is
    taken only while no evaluation wants the GPU, and at each `pause` (between the instruments'
    steps) it is given up while one does, and taken again after."""

    def __init__(self, gpu: str) -> None:
        self.gpu = gpu
        self.fd: int | None = None
        self.waited = 0.0  # seconds spent waiting for the turn, at the start and in pauses

    @contextmanager
    def held(self) -> Iterator[None]:
        self._take()
        try:
            yield
        finally:
            self._drop()

    def pause(self) -> float:
        """Give the turn to an evaluation that wants it, if one does; the seconds this waited."""
        if not self._evaluation_wants():
            return 0.0
        self._drop()
        return self._take()

    def _take(self) -> float:
        t0 = time.monotonic()
        fd = _open(turn_path(self.gpu))
        while True:
            self._until_no_evaluation_wants()
            fcntl.flock(fd, fcntl.LOCK_EX)
            if not self._evaluation_wants():
                break
            fcntl.flock(fd, fcntl.LOCK_UN)  # one came meanwhile: it goes first
        self.fd = fd
        spent = time.monotonic() - t0
        self.waited += spent
        return spent

    def _drop(self) -> None:
        if self.fd is not None:
            os.close(self.fd)  # releases the lock
            self.fd = None

    def _until_no_evaluation_wants(self) -> None:
        want = _open(turn_path(self.gpu, "want"))
        try:
            fcntl.flock(want, fcntl.LOCK_EX)  # granted once no evaluation holds it shared
        finally:
            os.close(want)

    def _evaluation_wants(self) -> bool:
        want = _open(turn_path(self.gpu, "want"))
        try:
            fcntl.flock(want, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        finally:
            os.close(want)
        return False


def takes_turns(config: EvaluationConfig) -> bool:
    return config.device == "cuda" and settings.EVAL_WORKERS_PER_GPU > 1


def evaluate_in_turn(problem_source: str, kernel_source: str, config: EvaluationConfig) -> EvaluationResult:
    """`evaluation.evaluate`, in this GPU's turn where workers share it; the wait is recorded in
    the result's stages as `turn_wait` (not the kernel's time, and not the GPU's)."""
    if not takes_turns(config):
        return evaluate(problem_source, kernel_source, config)
    if config.earlier_timing is not None:  # a follow-up: the instruments of a stored verdict
        turn = FollowUpTurn(this_gpu())
        result = evaluate(problem_source, kernel_source, config, turn=turn.held, pause=turn.pause)
        result.timings_s["turn_wait"] = round(turn.waited, 4)
        return result
    waited: list[float] = []
    result = evaluate(problem_source, kernel_source, config, turn=partial(gpu_turn, this_gpu(), waited))
    if waited:
        result.timings_s["turn_wait"] = round(waited[0], 4)
    return result
