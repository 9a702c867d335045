"""What the reference process found of a problem that every evaluation of it finds the same, kept
in the evaluating process: the meta device's sizes (``memory_plan``) and the work of one forward
(the speed-of-light instrument).

Both are the reference's own code, seeded, run on the meta device (or, where it does not run there,
on the device), so they depend only on the problem's source, its scale and the run's precision. They
are costly to find the first time in a process: the first operator on the meta device imports
``torch._dynamo`` and sympy, 1.2-2 s of the reference process's CPU on a 2-core machine, and the work
count's ``FlopCounterMode`` more. A worker evaluates the same problems again and again (a run's
kernels share its problems; the field has several kernels a problem), so each is found once per
worker process. Figures of a moment (the card's free memory) are never kept.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from typing import Any

from evaluation.phases.session import Pair


def problem_digest(problem_source: str) -> str:
    return hashlib.sha256(problem_source.encode()).hexdigest()


class ProblemFacts:
    """The last ``capacity`` facts, by (the problem's digest, its scale, what). Thread-safe: a
    worker's threads may evaluate at once. A pair with no digest keeps nothing."""

    def __init__(self, capacity: int = 512) -> None:
        self.capacity = capacity
        self._kept: OrderedDict[tuple[str, int, str], Any] = OrderedDict()
        self._lock = threading.Lock()

    @staticmethod
    def _key(pair: Pair, what: str) -> tuple[str, int, str] | None:
        return (pair.problem_digest, pair.cfg.size_scale, what) if pair.problem_digest else None

    def get(self, pair: Pair, what: str) -> Any | None:
        key = self._key(pair, what)
        if key is None:
            return None
        with self._lock:
            found = self._kept.get(key)
            if found is not None:
                self._kept.move_to_end(key)
            return found

    def put(self, pair: Pair, what: str, value: Any) -> None:
        key = self._key(pair, what)
        if key is None:
            return
        with self._lock:
            self._kept[key] = value
            self._kept.move_to_end(key)
            while len(self._kept) > self.capacity:
                self._kept.popitem(last=False)


FACTS = ProblemFacts()
