"""What the reference process found of a problem that every evaluation of it finds the same, kept
in the evaluating process: the meta device's sizes (``memory_plan``) and the work of one forward
(the speed-of-light instrument).

Both are the reference's own code, seeded, run on the meta device (or, where it does not run there,
on the device), so they depend only on the problem's source, its scale and the run's precision (and
on the code that finds them: the harness's and torch's version are in the key). They
are costly to find the first time in a process: the first operator on the meta device imports
``torch._dynamo`` and sympy, 1.2-2 s of the reference process's CPU on a 2-core machine, and the work
count's ``FlopCounterMode`` more. A worker evaluates the same problems again and again (a run's
kernels share its problems; the field has several kernels a problem), and the site's worker starts
each job in a fresh process, so the facts are kept twice: in this process's memory, and in the build
cache's root (``.problem_facts/<digest>.json``, written by the parent, root's where the sandbox
switches uids: a kernel reads the cache's root but writes only its own entry), where every worker
and command of the host finds them. Figures of a moment (the card's free memory) are never kept; a
fact is a small JSON object, checked by whoever uses it.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Protocol

from evaluation.results.harness_id import harness_digest, torch_version
from evaluation.results.types import EvaluationConfig
from evaluation.sandbox.safe_files import read_json, replace_json

#: The folder, in the build cache's root, of the facts kept on disk (a dot name: never evicted).
FACTS_FOLDER = ".problem_facts"


def problem_digest(problem_source: str) -> str:
    """The problem's key: its source, and the harness's code and torch's version that find its facts
    (a fact another version found is found again)."""
    stamp = f"{harness_digest()}\0{torch_version()}\0"
    return hashlib.sha256((stamp + problem_source).encode()).hexdigest()


class ProblemAt(Protocol):
    """What a fact is kept under: the problem (its digest), the scale and the build cache of a
    configuration. An evaluation's ``Pair`` is one; ``ProblemKey`` is one with no evaluation."""

    @property
    def problem_digest(self) -> str: ...

    @property
    def cfg(self) -> EvaluationConfig: ...


@dataclass(frozen=True)
class ProblemKey:
    problem_digest: str
    cfg: EvaluationConfig


class ProblemFacts:
    """The last ``capacity`` facts in memory, every fact on disk, by (the problem's digest, its
    scale, what). Thread-safe: a worker's threads may evaluate at once. A pair with no digest keeps
    nothing."""

    def __init__(self, capacity: int = 512) -> None:
        self.capacity = capacity
        self._kept: OrderedDict[tuple[str, int, str], dict[str, Any]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, pair: ProblemAt, what: str) -> dict[str, Any] | None:
        if not pair.problem_digest:
            return None
        key = (pair.problem_digest, pair.cfg.size_scale, what)
        with self._lock:
            found = self._kept.get(key)
            if found is not None:
                self._kept.move_to_end(key)
                return dict(found)
        on_disk = read_json(_path(pair)).get(f"{pair.cfg.size_scale}|{what}")
        if not isinstance(on_disk, dict):
            return None
        self._remember(key, on_disk)
        return dict(on_disk)

    def put(self, pair: ProblemAt, what: str, value: dict[str, Any]) -> None:
        if not pair.problem_digest:
            return
        self._remember((pair.problem_digest, pair.cfg.size_scale, what), dict(value))
        path = _path(pair)
        try:
            os.makedirs(os.path.dirname(path), mode=0o755, exist_ok=True)
        except OSError:
            return  # kept in memory only
        # Two evaluations writing at once may each keep only their own fact: the other's is found again.
        replace_json(path, {**read_json(path), f"{pair.cfg.size_scale}|{what}": dict(value)})

    def _remember(self, key: tuple[str, int, str], value: dict[str, Any]) -> None:
        with self._lock:
            self._kept[key] = value
            self._kept.move_to_end(key)
            while len(self._kept) > self.capacity:
                self._kept.popitem(last=False)


def _path(pair: ProblemAt) -> str:
    return os.path.join(pair.cfg.build_cache_dir, FACTS_FOLDER, f"{pair.problem_digest}.json")


FACTS = ProblemFacts()

#: The byte counts both kept facts hold (the estimate's sizes, the work of one forward).
SIZE_FIELDS = ("input_bytes", "param_bytes", "output_bytes")


def whole_sizes(fact: dict[str, Any] | None) -> bool:
    """Whether a kept fact holds every byte count as a whole number (a fact from disk is checked)."""
    return fact is not None and all(type(fact.get(name)) is int and fact[name] >= -1 for name in SIZE_FIELDS)
