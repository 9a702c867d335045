"""Free space on the worker hosts: no evaluation starts below EVAL_MIN_FREE_MB, and operators see why.

A full scratch disk once turned correct kernels into `runtime_error` verdicts. The scoring library
now tells such failures apart (evaluation.host_errors: status `infrastructure_error`, retried, never
a verdict); this module keeps a worker from starting one at all on a host short of space:

* `shortage()`: the scratch folder (where each evaluation's sandbox lives: $KB_WORK_DIR, /dev/shm or
  $TMPDIR, as evaluation.sandbox.work_root chooses) or the build cache ($KB_BUILD_CACHE) has less
  than EVAL_MIN_FREE_MB free; the job then defers the evaluation without using an attempt;
* `report()`: each host writes what it found to Redis (one key per host, expiring after a few sweep
  intervals, so a host that stopped reporting drops out), from every sweep and every refusal;
* `reports()`: what the hosts said, for /healthz and `manage.py queue_status`.
"""

from __future__ import annotations

import json
import logging
import socket
from dataclasses import asdict, dataclass
from typing import Any

from django.conf import settings
from django.utils import timezone

from evaluation.cache_evict import evict
from evaluation.host_errors import free_mb, low_space, scratch_root
from evaluation.sandbox import work_root
from evaluation.types import default_build_cache_dir
from leaderboard.evaluations.queue import redis_connection

log = logging.getLogger(__name__)

KEY_PREFIX = "kb:eval-host-space:"


@dataclass(frozen=True)
class HostSpace:
    host: str
    free_mb: dict[str, float]  # folder label -> MB free
    floor_mb: int
    shortage: str  # empty when every folder has room
    at: str  # ISO time of the report

    @property
    def low(self) -> bool:
        return bool(self.shortage)


def evaluation_folders() -> dict[str, str]:
    """The folders an evaluation writes to on this host, by label."""
    return {"scratch": scratch_root(work_root()), "build cache": default_build_cache_dir()}


def evict_build_cache() -> list[str]:
    """Keep this host's build cache within EVAL_BUILD_CACHE_MAX_AGE_DAYS and EVAL_BUILD_CACHE_MAX_MB
    (the sweeper child runs it each sweep); the keys removed."""
    removed = evict(default_build_cache_dir(), settings.EVAL_BUILD_CACHE_MAX_MB, settings.EVAL_BUILD_CACHE_MAX_AGE_DAYS)
    if removed:
        log.info("build cache: evicted %d entries", len(removed))
    return removed


def shortage() -> str:
    """Why this host must not start an evaluation now ('' when it has room)."""
    return low_space(evaluation_folders(), settings.EVAL_MIN_FREE_MB) or ""


def measure() -> HostSpace:
    free: dict[str, float] = {}
    for label, path in evaluation_folders().items():
        try:
            free[label] = round(free_mb(path), 1)
        except OSError:
            free[label] = -1.0  # unreadable: shortage() names it
    return HostSpace(
        host=socket.gethostname(),
        free_mb=free,
        floor_mb=settings.EVAL_MIN_FREE_MB,
        shortage=shortage(),
        at=timezone.now().isoformat(),
    )


def report(space: HostSpace | None = None) -> HostSpace:
    """Measure (unless given) and publish this host's free space; never raises for Redis trouble."""
    space = space or measure()
    ttl = max(60, 3 * settings.EVAL_SWEEP_INTERVAL_S)
    try:
        redis_connection().set(KEY_PREFIX + space.host, json.dumps(asdict(space)), ex=ttl)
    except Exception as exc:  # the sweep and the job go on without it
        log.warning("could not report free space to Redis: %s", exc)
    if space.low:
        log.warning("host %s: %s; no evaluation starts here until there is room", space.host, space.shortage)
    return space


def reports() -> list[HostSpace]:
    """What every worker host said in the last few sweep intervals, by host name."""
    conn = redis_connection()
    found = []
    for key in sorted(conn.scan_iter(match=KEY_PREFIX + "*", count=500)):
        raw = conn.get(key)
        if raw:
            data: dict[str, Any] = json.loads(raw)
            found.append(HostSpace(**data))
    return found
