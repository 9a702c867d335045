"""What the kernel's code does to the harness it runs in, seen by an audit hook (child side, stdlib only).

The harness's process also runs the untrusted kernel, so every Python object in it is reachable by
the kernel's code: through the interpreter's frames, the garbage collector, ``ctypes`` or plain
module attributes. A source regex misses such code as soon as it spells a name by joining strings.
This module watches what the code *does* instead, through an audit hook (``sys.addaudithook``),
which cannot be removed once added and whose state lives in a closure that no frame of the kernel
leads to (the hook runs above the code that raised the event, never below it):

- frame access from the kernel's own code: ``sys._getframe`` called by it (directly or through
  ``inspect``/``traceback``), a traceback's or generator's frame read by it, ``sys._current_frames``,
  a trace or profile function set by it, interpreter symbols looked up through ``ctypes``;
- the garbage collector's object lists (``gc.get_objects``, ``get_referrers``, ``get_referents``);
- the harness's functions rewritten (``__code__``, ``__defaults__``);
- and, when the harness asks (``check``: after every request), whether the harness's own
  functions, its timing primitives and its switches are still the objects they were when the hook
  was installed (before the kernel was imported): a swapped clock, event or stream is found by
  identity, however the kernel reached it.

None of this is the authority on time: the parent's clock is (evaluation.phases.timing). These findings
are flags for reviewers, raised from what the code did.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Callable
from typing import Any

#: The event the harness raises (with itself as argument) to have its objects checked.
CHECK_EVENT = "evaluation.harness_check"
#: Files whose functions walk frames on their caller's behalf: the walk is charged to that caller.
_HELPERS = ("/inspect.py", "/traceback.py", "/threading.py", "/ctypes/__init__.py")
_FRAME_ATTRS = frozenset({"tb_frame", "gi_frame", "cr_frame", "ag_frame"})
_ALWAYS = {"sys._current_frames": "sys._current_frames", "sys._current_exceptions": "sys._current_exceptions",
           "gc.get_objects": "gc.get_objects", "gc.get_referrers": "gc.get_referrers",
           "gc.get_referents": "gc.get_referents"}
_BY_CALLER = {"sys._getframe": "sys._getframe", "sys.settrace": "sys.settrace", "sys.setprofile": "sys.setprofile"}
#: The harness's clock, its GPU timing objects and the placement's release of cached blocks:
#: read-only properties of the harness once the kernel is imported (sealed_slots; harness.SEALED).
SEALED = ("timer_fn", "_sync", "_cuda_sync", "_ev_record", "_ev_elapsed", "_ev_query", "_current_stream",
          "_ev_start", "_ev_end", "_l2_buf", "_gpu_sleep", "_slack_cycles", "_empty_cache")
#: Harness attributes whose change means the timing was tampered with (the rest: harness access): the
#: sealed slots, the clock, and anything of the harness's timing half (its class and its module).
TIMING_NAMES = frozenset({*SEALED, "_timed_call", "time_calls", "perf_counter_ns", "TimingRequests", "timing_requests"})


class Tampered(Exception):  # noqa: N818 - raised through sys.audit to the harness: a finding, not an error
    """Raised by the hook, through ``sys.audit(CHECK_EVENT, harness)``, with what it found."""

    def __init__(self, findings: list[tuple[str, str]]) -> None:
        super().__init__("; ".join(m for _c, m in findings))
        self.findings = findings


def _plain(value: Any) -> bool:
    return isinstance(value, (int, float, str, bytes, bool, type(None)))


def _objects(harness: Any, modules: tuple[types.ModuleType, ...], sealed: tuple[str, ...]) -> dict[str, Any]:
    """What must not change once the kernel is imported, by a name for the message: the harness's
    classes (its bases in other modules too), its attributes, and the globals of its modules."""
    found: dict[str, Any] = {}
    for cls in type(harness).__mro__[:-1]:  # not object's
        found.update({f"{cls.__name__}.{k}": v for k, v in vars(cls).items() if not k.startswith("__")})
    for k, v in vars(harness).items():
        # Attributes still None here are filled in later by the harness itself (outputs, places).
        if v is not None and (callable(v) or _plain(v) or type(v).__name__ in ("Event", "Stream", "Tensor", "module")):
            found[f"harness.{k}"] = v
    for k in sealed:
        found[f"harness.{k}"] = getattr(harness, k, None)
    for module in modules:
        for k, v in vars(module).items():
            if callable(v) or (k.startswith("_") and _plain(v)) or k.isupper():
                found[f"{module.__name__}.{k}"] = v
    for k, v in list(found.items()):
        code = getattr(v, "__code__", None)
        if isinstance(v, types.FunctionType) and code is not None:
            found[f"{k}.__code__"] = code
    found["harness.disabled (contents)"] = frozenset(getattr(harness, "disabled", ()))
    return found


def _differs(old: Any, new: Any) -> bool:
    return (old != new) if _plain(old) or isinstance(old, frozenset) else old is not new


def _timing(name: str) -> bool:
    return any(part in TIMING_NAMES for part in name.split("."))


def _judge_changes(before: dict[str, Any], now: dict[str, Any], mutable: frozenset[str]) -> list[tuple[str, str]]:
    changed = sorted(k for k, v in before.items() if k not in mutable and _differs(v, now.get(k, _MISSING)))
    if not changed:
        return []
    timing = [k for k in changed if _timing(k)]
    out = []
    if timing:
        out.append(("patched_timer", "kernel replaced the harness's timing objects: " + ", ".join(timing[:6])))
    if len(timing) < len(changed):
        out.append(("harness_memory_access", "kernel changed the harness's objects: "
                    + ", ".join([k for k in changed if k not in timing][:6])))
    return out


_MISSING = object()


class _Watch:
    """The hook's state: what the harness's objects were at install, and what was seen since the
    last check. Reachable from no frame of the kernel's (the interpreter keeps the hook)."""

    def __init__(self, harness: Any, modules: tuple[types.ModuleType, ...], kernel_path: str,
                 sealed: tuple[str, ...], mutable: frozenset[str]) -> None:
        self.modules, self.kernel_path, self.sealed, self.mutable = modules, kernel_path, sealed, mutable
        self.names = frozenset({__name__, *(m.__name__ for m in modules)})
        self.before = _objects(harness, modules, sealed)
        self.seen: list[str] = []
        self.busy = False
        self.getframe = sys._getframe
        # Only the harness's own check is answered: a kernel raising the event itself would read
        # (and clear) what was seen of it.
        self.checker = getattr(getattr(type(harness), "_check_guard", None), "__code__", None)

    def kernel_code(self, frame: Any) -> bool:
        """Whether ``frame`` is the kernel's code, or a helper (inspect.stack, ctypes' lookup) it called."""
        for _ in range(8):
            if frame is None:
                return False
            name = frame.f_code.co_filename
            if name == self.kernel_path or (name.startswith("<") and not name.startswith("<frozen")):
                return True
            if not name.endswith(_HELPERS):
                return False
            frame = frame.f_back
        return False

    def hook(self, event: str, args: tuple[Any, ...]) -> None:
        if self.busy:
            return
        if event == CHECK_EVENT:
            self.busy = True
            try:
                from_harness = self.getframe(1).f_code is self.checker
            finally:
                self.busy = False
            if from_harness:
                self.check(args[0])
            else:
                self.note("a harness check raised by other code")
        elif event in _ALWAYS:
            self.note(_ALWAYS[event])
        elif (event in _BY_CALLER or (event == "object.__getattr__" and args[1] in _FRAME_ATTRS)
              or (event == "ctypes.dlsym" and str(args[1]).startswith(("Py", "_Py")))):
            self.busy = True
            try:
                if self.kernel_code(self.getframe(1)):  # frame 1: the code that raised the event
                    self.note(_BY_CALLER.get(event) or f"{event} {args[1]}")
            finally:
                self.busy = False
        elif event == "object.__setattr__" and getattr(args[0], "__module__", "") in self.names:
            self.note(f"a rewrite of {getattr(args[0], '__qualname__', '?')}.{args[1]}")

    def note(self, what: str) -> None:
        if len(self.seen) < 32 and what not in self.seen:
            self.seen.append(what)

    def check(self, harness: Any) -> None:
        self.busy = True
        try:
            findings = _judge_changes(self.before, _objects(harness, self.modules, self.sealed), self.mutable)
        finally:
            self.busy = False
        if self.seen:
            findings.append(("harness_memory_access", "kernel code used " + ", ".join(self.seen)
                             + ", which can reach the harness's objects"))
            self.seen.clear()
        if findings:
            raise Tampered(findings)


def install(harness: Any, modules: tuple[types.ModuleType, ...], kernel_path: str, sealed: tuple[str, ...],
            mutable: frozenset[str] = frozenset()) -> None:
    """Add the hook. ``modules``: those whose globals the harness's code reads (its functions, its
    clock, its constants); ``sealed``: read-only properties of the harness to check by value;
    ``mutable``: names (as the messages spell them) the harness itself changes after this point."""
    sys.addaudithook(_Watch(harness, modules, kernel_path, sealed, mutable).hook)


def sealed_slots(names: tuple[str, ...]) -> tuple[dict[str, property], Callable[[], None]]:
    """Properties for ``names`` whose values live in a closure, settable until ``lock()`` is called
    (before the kernel is imported), read-only after: an assignment to the harness's clock then
    raises instead of replacing it."""
    store: dict[str, Any] = {}
    locked = [False]

    def slot(name: str) -> property:
        def get(self: Any) -> Any:
            try:
                return store[name]
            except KeyError:
                raise AttributeError(name) from None

        def put(self: Any, value: Any) -> None:
            if locked[0]:
                raise AttributeError(f"{name} is read-only")
            store[name] = value

        return property(get, put)

    def lock() -> None:
        locked[0] = True

    return {n: slot(n) for n in names}, lock
