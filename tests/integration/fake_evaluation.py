"""A stand-in for `evaluation.evaluate`, injected into workers with EVAL_FUNCTION.

The queueing tests (exactly once, 200 at once, killed workers, Redis lost) test the job machinery,
not the scoring: a real evaluation costs seconds of CPU per kernel (two sandboxed Python processes
importing torch), which would make 200 jobs take minutes and make timings depend on the scoring.
The end-to-end test uses the real library.

The kernel source steers the fake with comment lines:
    # fake: marker=<text>        names the call in the log ($KB_FAKE_EVAL_LOG), one line per start/end
    # fake: sleep=<seconds>      sleeps that long
    # fake: sleep_first=<s>      sleeps that long on the first call for this marker only
    # fake: raise                raises (an infrastructure failure, as a broken library would)
    # fake: raise_first          raises on the first call for this marker only
    # fake: status=<status>      the verdict to return (default: correct), or infrastructure_error
    # fake: broken_host=<name>   infrastructure_error (EROFS) on the host of that EVAL_HOST_NAME only
    # fake: speedup=<x>          the speedup of a correct verdict (default 1.5), its interval x +- 10%
    # fake: later_status=<status> the verdict of the instruments' follow-up (default: correct)
    # fake: later_raise          the instruments' follow-up raises (a failure of our side)

The instruments' follow-up (a config judging earlier figures: leaderboard/evaluations/follow_up.py) logs its
marker as `<marker>:instruments` and returns what fake instruments found (a determinism record, the
`nondeterministic` flag).
"""

from __future__ import annotations

import os
import re
import time
from typing import Any

# What the fake says went wrong, by status (a host's failure names the host's reason).
FAKE_ERRORS = {"infrastructure_error": "fake: No space left on device"}
BROKEN_HOST_ERROR = "could not set up the sandbox: EROFS: Read-only file system (fake)"


def _directives(source: str) -> dict[str, str]:
    found: dict[str, str] = {}
    for key, value in re.findall(r"#\s*fake:\s*(\w+)(?:=(\S+))?", source):
        found[key] = value
    return found


def _log(line: str) -> None:
    path = os.environ.get("KB_FAKE_EVAL_LOG")
    if path:
        with open(path, "a") as f:  # one short write per line: appends from processes do not interleave
            f.write(line + "\n")


def _starts(marker: str) -> int:
    path = os.environ.get("KB_FAKE_EVAL_LOG")
    if not path or not os.path.exists(path):
        return 0
    with open(path) as f:
        return sum(1 for line in f if line.split()[:2] == ["start", marker])


def evaluate(problem_source: str, kernel_source: str, config: Any = None) -> dict[str, Any]:
    d = _directives(kernel_source)
    if config is not None and config.earlier_timing is not None:
        return _instruments_later(d, config)
    marker = d.get("marker", "-")
    first = _starts(marker) == 0
    _log(f"start {marker} {os.getpid()}")
    if "sleep" in d:
        time.sleep(float(d["sleep"]))
    if "sleep_first" in d and first:
        time.sleep(float(d["sleep_first"]))
    if "raise" in d or ("raise_first" in d and first):
        raise RuntimeError("fake infrastructure failure")
    status = d.get("status", "correct")
    if d.get("broken_host") and d["broken_host"] == os.environ.get("EVAL_HOST_NAME"):
        _log(f"end {marker} {os.getpid()}")
        return {"status": "infrastructure_error", "error": BROKEN_HOST_ERROR}
    correct = status == "correct"
    speedup = float(d.get("speedup", 1.5))
    _log(f"end {marker} {os.getpid()}")
    return {
        "status": status,
        "compiled": status != "compile_error",
        "correct": correct,
        "speedup": speedup if correct else None,
        "speedup_interval": [0.9 * speedup, 1.1 * speedup] if correct else None,
        "kernel_ms": {"median": 1.0, "mean": 1.0, "std": 0.0, "min": 1.0, "max": 1.0, "trials": 3},
        "reference_ms": {"median": 1.5, "mean": 1.5, "std": 0.0, "min": 1.5, "max": 1.5, "trials": 3},
        "trials_passed": 5 if correct else 0,
        "trials_total": 5,
        "flags": [],
        "notes": [],
        "error": None if correct else FAKE_ERRORS.get(status, "fake failure"),
        "log": "",
        "timings_s": {"total": 0.0},
        "environment": {"fake": True},
        # Inline instruments, as the library runs them when the config asks for them.
        "instruments": {"determinism": {"equal": True}}
        if correct and config is not None and config.instruments
        else {},
    }


def _instruments_later(d: dict[str, str], config: Any) -> dict[str, Any]:
    """The instruments' follow-up: what they found, judging the verdict's figures it was given."""
    marker = f"{d.get('marker', '-')}:instruments"
    _log(f"start {marker} {os.getpid()}")
    if "sleep" in d:
        time.sleep(float(d["sleep"]))
    if "later_raise" in d:
        raise RuntimeError("fake infrastructure failure of the instruments")
    status = d.get("later_status", "correct")
    _log(f"end {marker} {os.getpid()}")
    given = config.earlier_timing
    return {
        "status": status,
        "compiled": True,
        "correct": status == "correct",
        "speedup": given.speedup,
        "flags": [*given.flags, {"code": "nondeterministic", "message": "fake: two runs differed"}],
        "error": None if status == "correct" else "fake: wrong the second time",
        "instruments": {"determinism": {"equal": False}, "cost_s": {"repeat": 0.5}},
        "timings_s": {"instruments": 0.5, "total": 1.25},
    }
