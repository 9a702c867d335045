"""The audit hook that watches what a kernel's code does to the harness (evaluation.child.harness_guard).
Each case runs in an interpreter of its own: an audit hook cannot be removed once added."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

#: The harness's own check, as evaluation.child.harness makes it: the codes of what the hook found.
CHECK = """    def _check_guard(self):
        try:
            sys.audit(harness_guard.CHECK_EVENT, self)
            return []
        except harness_guard.Tampered as found:
            return sorted({c for c, _ in found.findings})
"""

SETUP = """
import json, sys, types
sys.path.insert(0, {root!r})
from evaluation.child import harness_guard

KERNEL = "/kernels/k.py"


class Harness:
    def __init__(self):
        self.disabled = set()
        self.timer_fn = len

{check}

props, lock = harness_guard.sealed_slots(("clock",))
for n, p in props.items():
    setattr(Harness, n, p)
h = Harness()
h.clock = len
lock()
harness_guard.install(h, (types.ModuleType("m"),), KERNEL, ("clock",))


def kernel(src):
    exec(compile(src, KERNEL, "exec"), {{"h": h, "sys": sys}})
"""


def guard(body: str) -> list[list[str]]:
    script = SETUP.format(root=str(ROOT), check=CHECK) + "\nout = []\n" + body + "\nprint(json.dumps(out))\n"
    done = subprocess.run([sys.executable, "-I", "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_frames_read_by_the_kernels_code_are_seen_however_spelled():
    assert guard(
        "kernel(\"getattr(sys, '_get' + 'frame')(0)\"); out.append(h._check_guard()); out.append(h._check_guard())"
    ) == [["harness_memory_access"], []]


def test_frames_read_by_the_standard_library_on_its_own_behalf_are_not():
    assert guard(
        'import collections, typing\nkernel("import collections, typing, logging\\n'
        "collections.namedtuple('P', 'a b')\\ntyping.TypeVar('T')\\nlogging.getLogger('x').info('y')\")\n"
        "out.append(h._check_guard())"
    ) == [[]]


def test_the_sealed_clock_cannot_be_assigned_and_a_swap_behind_it_is_found():
    assert guard("""
try:
    h.clock = print
    out.append("assigned")
except AttributeError:
    out.append("read-only")
for cell in vars(Harness)["clock"].fget.__closure__:
    if isinstance(cell.cell_contents, dict):
        cell.cell_contents["clock"] = print
h.timer_fn = print
out.append(h._check_guard())
""") == ["read-only", ["harness_memory_access", "patched_timer"]]  # clock: not a timing name here


def test_a_check_raised_by_other_code_is_not_answered_and_is_reported():
    assert guard("kernel(\"sys.audit('evaluation.harness_check', h)\"); out.append(h._check_guard())") == [
        ["harness_memory_access"]
    ]


TWO_MODULES = """
import json, sys, types
sys.path.insert(0, {root!r})
from evaluation.child import harness_guard

KERNEL = "/kernels/k.py"
timing = types.ModuleType("timing_requests")  # the harness's timing half, in a module of its own
exec("import time\\nperf_counter_ns = time.perf_counter_ns\\nclass TimingRequests:\\n    def _timed_call(self):\\n"
     "        return perf_counter_ns()\\n", vars(timing))


class Harness(timing.TimingRequests):
    def __init__(self):
        self.disabled = set()

{check}

h = Harness()
harness_guard.install(h, (types.ModuleType("m"), timing), KERNEL, ())
out = []
"""


def _two_modules(body: str) -> list[list[str]]:
    script = TWO_MODULES.format(root=str(ROOT), check=CHECK) + body + "\nprint(json.dumps(out))\n"
    done = subprocess.run([sys.executable, "-I", "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_swap_in_the_harnesss_base_class_or_its_module_is_a_patched_timer():
    # The harness's timing methods live in a base class of another module: its methods and that
    # module's clock are the harness's as much as its own class's are.
    assert _two_modules("timing.TimingRequests._timed_call = lambda self: 0\nout.append(h._check_guard())") == [
        ["patched_timer"]
    ]
    assert _two_modules("timing.perf_counter_ns = lambda: 0\nout.append(h._check_guard())") == [["patched_timer"]]


def test_the_harness_untouched_across_two_modules_is_no_finding():
    assert _two_modules("h._timed_call()\nout.append(h._check_guard())") == [[]]
