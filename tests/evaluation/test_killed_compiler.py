"""Issue 32 case 1: a compiler killed from outside (SIGKILL of cc1plus: the out-of-memory killer, an
operator, a builder that died) is a failure of the host, never the kernel's ``compile_error``, and
never cached. Real C++ ``load_inline`` builds with gcc on the CPU; a thread of the test SIGKILLs the
``cc1plus`` that the build under test started (a descendant of this test process, nobody else's).

Before the fix, the look-ahead build wrote "c++: fatal error: Killed signal terminated program
cc1plus" into the cache entry (``.kb_compile_error.json``) and every later evaluation of the source
got ``compile_error`` without compiling."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time

import pytest

from evaluation import INFRASTRUCTURE_ERROR
from evaluation.builds.entry import FAILED_MARKER
from evaluation.builds.stage import build_dir_for, prebuild
from evaluation.results.types import EvaluationConfig
from evaluation.sandbox.host_errors import counts_against_host, killed_build
from tests.evaluation.helpers import EVAL_PROBLEMS, run
from tests.evaluation.test_build_stage import kernel
from tests.integration.fault_report import record

ADD_ONE = EVAL_PROBLEMS / "add_one.py"

# What gcc, ninja and torch really print (gcc 12's driver; older gcc's internal-error form).
KILLED_TEXTS = (
    "Error building extension 'kb_x': [1/2] c++ -MMD -c main.cpp -o main.o\nFAILED: main.o\n"
    "c++: fatal error: Killed signal terminated program cc1plus\ncompilation terminated.\n"
    "ninja: build stopped: subcommand failed.",
    "g++: internal compiler error: Killed (program cc1plus)",
    "build process: the build process was killed by signal SIGKILL",
    "build process: the build process exited unexpectedly with status 1",  # behind unshare --fork
)
DIAGNOSTICS = (
    "main.cpp:3:5: error: expected ';' before '}' token",
    # A kernel's own `#error` (or any text it prints) quoting the driver's words is the kernel's.
    "/tmp/kb/main.cpp:1:2: error: #error signal terminated program cc1plus\n"
    "    1 | #error signal terminated program cc1plus\n      |  ^~~~~",
    "RuntimeError: /tmp/kb/main.cpp:1:2: error: #error signal terminated program cc1plus",
    "cc1plus: out of memory allocating 65536 bytes after a total of 1048576 bytes",
    "the build process exceeded the memory limit (5000 MB proportional set size > 4096 MB)",
    "the build process was killed by signal SIGSEGV",
)


def test_a_killed_build_is_told_from_a_compiler_diagnostic():
    for text in KILLED_TEXTS:
        assert killed_build(text), text
    for text in DIAGNOSTICS:
        assert killed_build(text) is None, text
    try:
        try:
            raise subprocess.CalledProcessError(-signal.SIGKILL, ["ninja", "-v"])
        except subprocess.CalledProcessError as inner:
            raise RuntimeError("Error building extension 'kb_x'") from inner
    except RuntimeError as outer:
        assert "died with <Signals.SIGKILL: 9>" in killed_build(outer)
    assert killed_build(subprocess.CalledProcessError(1, ["ninja", "-v"])) is None


def _descendants(root: int) -> dict[int, str]:
    """pid -> command name of every live descendant of ``root``."""
    parent: dict[int, int] = {}
    comm: dict[int, str] = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat") as fh:
                head, rest = fh.read().rsplit(")", 1)
            parent[int(pid)] = int(rest.split()[1])
            comm[int(pid)] = head.split("(", 1)[1]
        except (OSError, IndexError, ValueError):
            continue
    found: dict[int, str] = {}
    for pid in parent:
        p = pid
        while p in parent and p not in (0, 1):
            p = parent[p]
            if p == root:
                found[pid] = comm[pid]
                break
    return found


class CompilerKiller(threading.Thread):
    """SIGKILL the first ``cc1plus`` started under this test process, once it has run ``after_s``."""

    def __init__(self, after_s: float = 0.5, timeout_s: float = 300) -> None:
        super().__init__(daemon=True)
        self.after_s, self.timeout_s = after_s, timeout_s
        self.killed: list[int] = []
        self.done = threading.Event()

    def run(self) -> None:
        deadline = time.monotonic() + self.timeout_s
        seen: dict[int, float] = {}
        while time.monotonic() < deadline and not self.done.is_set():
            for pid, name in _descendants(os.getpid()).items():
                if name != "cc1plus":
                    continue
                if time.monotonic() - seen.setdefault(pid, time.monotonic()) >= self.after_s:
                    os.kill(pid, signal.SIGKILL)
                    self.killed.append(pid)
                    return
            time.sleep(0.05)

    def __enter__(self) -> CompilerKiller:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.done.set()
        self.join(timeout=10)


def _no_recorded_failure(cache: str) -> bool:
    return not any(FAILED_MARKER in files for _d, _s, files in os.walk(cache))


@pytest.mark.timeout(900)
def test_a_killed_compiler_is_retried_never_a_verdict_never_cached(tmp_path):
    cache = str(tmp_path / "cache")
    source = kernel("kb_killed_cc1plus")
    cfg = EvaluationConfig(build_cache_dir=cache, timeout_s=600)

    # 1. The look-ahead builder's compiler is killed (as in the fault run).
    with CompilerKiller() as killer:
        ahead = prebuild(source, cfg)
    assert killer.killed, "no cc1plus was seen"
    assert ahead.status == INFRASTRUCTURE_ERROR, (ahead.status, ahead.error)
    assert "Killed signal terminated program cc1plus" in ahead.error
    assert _no_recorded_failure(cache) and not build_dir_for(source, cfg).built

    # 2. The evaluation's own build stage meets the same: no verdict, nothing cached.
    with CompilerKiller() as killer:
        first = run(ADD_ONE, source, build_cache_dir=cache, timing_trials=2, correctness_trials=2, timeout_s=600)
    assert killer.killed
    assert first.status == INFRASTRUCTURE_ERROR, (first.status, first.error)
    assert not first.compiled and _no_recorded_failure(cache)

    # 3. An entry that an older release cached for a killed compiler is dropped and built again.
    poisoned = build_dir_for(source, cfg)
    assert poisoned.lock() and poisoned.begin()
    poisoned.publish(
        {
            "error": "RuntimeError: c++: fatal error: Killed signal terminated program cc1plus",
            "log": "compilation terminated.",
        }
    )
    poisoned.unlock()
    assert poisoned.failure is not None

    t0 = time.monotonic()
    again = run(ADD_ONE, source, build_cache_dir=cache, timing_trials=2, correctness_trials=2, timeout_s=600)
    assert again.status == "correct", (again.status, again.error, again.log[-2000:])
    assert not again.build_cached and again.timings_s["compile"] > 0
    assert build_dir_for(source, cfg).built and _no_recorded_failure(cache)
    record(
        "1. cc1plus SIGKILLed mid-compile",
        look_ahead=ahead.status,
        evaluation=first.status,
        evaluation_error=first.error[:160],
        poisoned_entry="dropped, rebuilt",
        next_evaluation=again.status,
        rebuilt_in_s=round(time.monotonic() - t0, 1),
    )


HASH_ERROR_KERNEL = """
import torch.nn as nn
from torch.utils.cpp_extension import load

with open("kb_hash_error.cpp", "w") as fh:  # no torch header first: gcc stops at once
    fh.write("#error signal terminated program cc1plus\\n")
ext = load(name="kb_hash_error", sources=["kb_hash_error.cpp"])

class ModelNew(nn.Module):
    def forward(self, x):
        return x + 1.0
"""
EXIT_KERNEL = """
import os
from torch.utils.cpp_extension import load_inline  # a C++ kernel: built by the build stage

os._exit(3)
"""


def test_a_kernel_quoting_the_drivers_words_gets_its_compile_error(tmp_path, monkeypatch):
    monkeypatch.setenv("KB_PCH", "0")
    out = prebuild(HASH_ERROR_KERNEL, EvaluationConfig(build_cache_dir=str(tmp_path), timeout_s=300))
    assert out.status == "compile_error", (out.status, out.error, out.log[-2000:])
    assert "#error signal terminated program cc1plus" in out.log


def test_a_build_process_that_exits_at_import_does_not_make_the_host_sick(tmp_path, monkeypatch):
    monkeypatch.setenv("KB_PCH", "0")
    out = prebuild(EXIT_KERNEL, EvaluationConfig(build_cache_dir=str(tmp_path), timeout_s=300))
    # Retried (no verdict, nothing cached), but nothing the host can check says the host killed it.
    assert out.status == INFRASTRUCTURE_ERROR and "exited unexpectedly with status" in out.error, out.error
    assert not counts_against_host(out.error)
