"""Shared helpers for the evaluation and adversarial suites (no database, no Django)."""

from __future__ import annotations

import contextlib
import fcntl
import glob
import json
import os
import pickle
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from benchmarks.wrapper_kernel import wrapper_kernel  # noqa: F401  (the tests' kernel, for their imports)
from evaluation import EvaluationConfig, EvaluationResult, evaluate
from evaluation.builds.stage import BuildOutcome, build_dir_for

ROOT = Path(__file__).resolve().parents[2]
EVAL_PROBLEMS = ROOT / "tests" / "evaluation" / "problems"
ADV = ROOT / "tests" / "adversarial"
ADV_PROBLEMS = ADV / "problems"
ADV_KERNELS = ADV / "kernels"
CATALOGUE = ROOT / "problems" / "catalogue"

has_cuda = False
try:  # checking availability in the test process is fine: tests are not the worker
    import torch

    has_cuda = torch.cuda.is_available()
except ImportError:  # pragma: no cover
    pass

needs_cuda = pytest.mark.skipif(not has_cuda, reason="needs a CUDA GPU (runs on the H200 via benchmarks/gpu)")
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="uid/namespace isolation needs root")


def read(path: Path | str) -> str:
    return Path(path).read_text()


def self_kernel(problem_src: str) -> str:
    """The reference rewritten as a kernel (class Model -> class ModelNew)."""
    return problem_src.replace("class Model(", "class ModelNew(")


def run(problem: Path | str, kernel_src: str, **kw: Any) -> EvaluationResult:
    kw.setdefault("correctness_trials", 3)
    kw.setdefault("timing_trials", 5)
    kw.setdefault("seed", 1234)
    kw.setdefault("timeout_s", 120)
    kw.setdefault("round_target_s", 0.01)
    kw.setdefault("cpu_threads", 1)  # steadier timings on small, shared CI machines
    return evaluate(read(problem), kernel_src, EvaluationConfig(**kw))


#: Runs of the naive harness at most, where an exploit is to show it is fooled (``naive``).
NAIVE_TRIES = 3


def naive(
    problem: Path | str, kernel: Path | str, *args: str, scale: int = 1, fooled_above: float | None = None
) -> dict[str, Any]:
    """Run the deliberately naive in-process harness on an exploit (in its own interpreter).
    ``fooled_above``: the speedup by which the exploit fools it on a quiet host; a run below that is
    run again, NAIVE_TRIES runs at most, and the best is returned (on the 2-core machine one run
    beside the suite's compiles read a cached output at 0.37x: the host's doing, not the exploit's)."""
    best: dict[str, Any] = {}
    for _ in range(NAIVE_TRIES if fooled_above is not None else 1):
        out = _naive_once(problem, kernel, args, scale)
        if not best or out.get("speedup", 0) > best.get("speedup", 0):
            best = out
        if fooled_above is None or (out.get("correct") and out.get("speedup", 0) > fooled_above):
            break
    return best


def _naive_once(problem: Path | str, kernel: Path | str, args: tuple[str, ...], scale: int) -> dict[str, Any]:
    env = {**os.environ, "KB_SCALE": str(scale)}
    out = subprocess.run(
        [sys.executable, str(ADV / "naive_harness.py"), str(problem), str(kernel), *args],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


#: The module name of the wrapper that test_pch and test_unit_cache both compare with a plain build
#: (the session's ``plain_wrapper``): one name, so one compile serves both.
WRAPPER_NAME = "kb_wrapper"


#: A build in its own interpreter: its environment (``BackgroundBuild``'s ``env``) is its own,
#: whatever the test that started it has patched into this process's.
_BUILD = """
import pickle, sys
from evaluation.builds.stage import prebuild
from evaluation.results.types import EvaluationConfig
source, cache, result = sys.argv[1:4]
outcome = prebuild(source, EvaluationConfig(build_cache_dir=cache, timeout_s=9000))
with open(result, "wb") as fh:
    pickle.dump(outcome, fh)
"""


class BackgroundBuild:
    """``prebuild(source)`` into ``folder/cache``, in a process of its own with ``env`` over this
    process's environment: ``start()`` starts it (once), ``result()`` waits for it and gives its
    ``BuildOutcome``. Whoever starts it waits for it in the same setup, so that it never runs beside
    another test. ``folder`` may be shared by the pytest processes of one run (``run_folder``): the
    first to start takes its lock and builds, another waits for that build's outcome, and builds
    itself only if that process ended without one."""

    def __init__(self, folder: str, source: str, env: dict[str, str]) -> None:
        self.source = source
        self.env = env
        self.cache = os.path.join(folder, "cache")
        self._result = os.path.join(folder, "outcome.pickle")
        self._log = os.path.join(folder, "build.log")
        self._lock = os.path.join(folder, "lock")
        self._held: int | None = None  # the lock's descriptor while this process builds
        self._proc: subprocess.Popen[bytes] | None = None
        self._outcome: BuildOutcome | None = None

    def start(self) -> None:
        if self._proc is not None or self._outcome is not None:
            return
        fd = os.open(self._lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return  # another process of this run is building it
        self._held = fd
        if os.path.exists(self._result):
            self._release()
            return
        env = {**os.environ, **self.env}
        args = [sys.executable, "-c", _BUILD, self.source, self.cache, self._result]
        with open(self._log, "wb") as log:
            # A session of its own: stop() ends the compilers under it too, not only the Python above them.
            self._proc = subprocess.Popen(
                args, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )

    def result(self) -> BuildOutcome:
        if self._outcome is None:
            self.start()
            if self._proc is None:
                self._wait_for_the_other()
            if self._proc is not None:
                rc = self._proc.wait()
                self._release()
                with open(self._log, encoding="utf-8", errors="replace") as fh:
                    assert rc == 0, fh.read()[-3000:]
            with open(self._result, "rb") as fh:
                self._outcome = pickle.load(fh)
        return self._outcome

    def _wait_for_the_other(self) -> None:
        """Wait until the process building it lets go of the lock; build here if it left no outcome."""
        fd = os.open(self._lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        finally:
            os.close(fd)
        if not os.path.exists(self._result):
            self.start()
            assert self._proc is not None or os.path.exists(self._result), "the shared build's lock is held"

    def _release(self) -> None:
        if self._held is not None:
            os.close(self._held)
            self._held = None

    @property
    def ext_dir(self) -> str:
        """The built extension's folder (``main.o``, the module's ``.so``)."""
        self.result()
        entry = build_dir_for(self.source, EvaluationConfig(build_cache_dir=self.cache)).path or ""
        (ext,) = glob.glob(os.path.join(entry, "torch_extensions", "*"))
        return ext

    def stop(self) -> None:
        if self._proc is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._proc.pid, signal.SIGKILL)  # the group outlives a leader that already ended
            self._proc.wait()
        self._release()


def run_folder(tmp_path_factory: pytest.TempPathFactory, name: str) -> str:
    """A folder every pytest process of this run finds at the same path (pytest-xdist's workers keep
    their temporary folders inside the run's), made once."""
    base = tmp_path_factory.getbasetemp()
    folder = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / name
    folder.mkdir(exist_ok=True)
    return str(folder)
