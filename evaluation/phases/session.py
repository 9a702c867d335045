"""One evaluation's pair of sandboxed processes, as the runner's phases see them.

``Pair`` sends requests to the reference and the kernel process and returns their typed replies
(evaluation.sandbox.protocol); any failure that ends the evaluation is raised as ``Abort`` with the status
it ends in. The phases (evaluation.phases.correctness, evaluation.phases.timing) work through it.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass

from evaluation.results.types import EvaluationConfig, EvaluationResult
from evaluation.sandbox.host_errors import CARD_FULL, INFRASTRUCTURE_ERROR, out_of_device_memory
from evaluation.sandbox.process import ChildError, SandboxProcess
from evaluation.sandbox.protocol import MalformedReply, R, Reply, Request, parse


class Abort(Exception):
    """Ends an evaluation early with ``status`` (and an error line, and a log excerpt)."""

    def __init__(self, status: str, error: str, log: str = "", kernel_side: bool = False) -> None:
        super().__init__(error)
        self.status = status
        self.error = error
        self.log = log
        self.kernel_side = kernel_side  # reported by the kernel's process (untrusted)


#: Extra seconds the (trusted) reference process gets beyond the kernel's deadline.
REFERENCE_GRACE_S = 30.0
MAX_FLAGS_PER_REPLY = 16
MAX_FLAG_MESSAGE = 500
_FLAG_CODE = re.compile(r"[a-z][a-z0-9_]{0,47}")


@dataclass
class Pair:
    cfg: EvaluationConfig
    res: EvaluationResult
    ref: SandboxProcess
    ker: SandboxProcess
    master: int
    deadline: float
    ref2: SandboxProcess | None = None  # a second reference process (timing only)
    # Between the instruments' steps: gives the GPU to a waiting evaluation, returns the seconds it waited.
    pause: Callable[[], float] | None = None
    problem_digest: str = ""  # the problem source's: what is kept of it by problem (problem_facts)

    def processes(self) -> list[SandboxProcess]:
        """Every process of the evaluation: the reference, the kernel, and the second reference if any."""
        return [self.ref, self.ker] + ([self.ref2] if self.ref2 is not None else [])

    def defence_on(self, name: str) -> bool:
        return name not in self.cfg.disable_defences

    def merge_flags(self, reply: Reply) -> None:
        """The flags a process's harness reported. The kernel's code shares that process and could
        write its replies, so what is taken is bounded: codes of the flag vocabulary's shape, short
        messages, a few per reply (a kernel can only add flags against itself, never remove one)."""
        for code, msg in list(reply.flags.items())[:MAX_FLAGS_PER_REPLY]:
            if isinstance(code, str) and _FLAG_CODE.fullmatch(code):
                self.res.add_flag(code, str(msg)[:MAX_FLAG_MESSAGE])

    def receive(self, p: SandboxProcess, cls: type[R], extra_s: float = 0.0) -> R:
        """The next reply of ``p``, typed; a dead, silent or garbled process raises Abort."""
        prefix = "" if p is self.ker else "reference: "
        grace = 0.0 if p is self.ker else REFERENCE_GRACE_S
        try:
            reply = parse(cls, p.recv(self.deadline + grace + extra_s))
        except ChildError as exc:
            raise Abort(exc.kind, prefix + exc.message) from exc
        except MalformedReply as exc:
            raise Abort("crashed", f"{prefix}the {p.role} process sent a malformed reply: {exc}") from exc
        # A failed request: first, whether the tree was over a limit (measured now, not when the
        # watchdog next looks), which then is what happened. A good reply is not held up.
        if not reply.ok and (over := p.check_limits()):
            raise Abort("crashed", prefix + over)
        return reply

    def request(self, p: SandboxProcess, msg: Request, cls: type[R], extra_s: float = 0.0) -> R:
        try:
            p.send(msg)
        except ChildError as exc:
            raise Abort(exc.kind, ("" if p is self.ker else "reference: ") + exc.message) from exc
        return self.receive(p, cls, extra_s)

    def both(self, msg: Request, cls: type[R], with_ref2: bool = False) -> tuple[R, R]:
        """Send ``msg`` to both processes (they work in parallel); return (reference, kernel) replies.
        With ``with_ref2`` the second reference process gets it too; a failure of it is the reference's."""
        extra = [self.ref2] if with_ref2 and self.ref2 is not None else []
        try:
            for p in (self.ref, self.ker, *extra):
                p.send(msg)
        except ChildError as exc:
            raise Abort(exc.kind, exc.message) from exc
        r_ker = self.receive(self.ker, cls)
        r_ref = self.receive(self.ref, cls)
        for p in extra:
            r2 = self.receive(p, cls)
            if r_ref.ok and not r2.ok:
                r_ref = r2
        return r_ref, r_ker

    def timed_request(self, p: SandboxProcess, msg: Request, cls: type[R]) -> tuple[R, int]:
        """``request`` with the parent's own clock around it (ns)."""
        w0 = time.perf_counter_ns()
        reply = self.request(p, msg, cls)
        return reply, time.perf_counter_ns() - w0

    def kernel_failed(self, reply: Reply, prefix: str = "") -> Abort:
        self.merge_flags(reply)
        return Abort(reply.kind or "runtime_error", f"{prefix}{reply.error}", reply.traceback, kernel_side=True)

    @staticmethod
    def reference_failed(reply: Reply, prefix: str = "reference failed: ") -> Abort:
        """The trusted reference's failure. Out of the card's memory it is the host's (the card could
        not hold the processes the harness runs side by side: no verdict on the kernel, whose honest
        run KernelBench's one-process harness would hold), else the problem's."""
        if out_of_device_memory(str(reply.error)):
            return Abort(INFRASTRUCTURE_ERROR, f"{CARD_FULL} in the reference process, so no verdict: {prefix}"
                                               f"{reply.error}", reply.traceback)
        kind = reply.kind if reply.kind != "incorrect" else "runtime_error"
        return Abort(kind, f"{prefix}{reply.error}", reply.traceback)
