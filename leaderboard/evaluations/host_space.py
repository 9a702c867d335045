"""The health of the worker hosts: no evaluation starts on a host short of space or broken, and
operators see why.

A full scratch disk once turned correct kernels into `runtime_error` verdicts. The scoring library
now tells such failures apart (evaluation.sandbox.host_errors: status `infrastructure_error`, retried, never
a verdict); this module keeps a worker from starting one at all on a host short of space:

* `shortage()`: the scratch folder (where each evaluation's sandbox lives: $KB_WORK_DIR, /dev/shm or
  $TMPDIR, as evaluation.sandbox.isolation.work_root chooses) or the build cache ($KB_BUILD_CACHE) has less
  than EVAL_MIN_FREE_MB free; the worker then takes no job off the queue (a job that gets here
  anyway, the space gone between the two checks, defers its evaluation without using an attempt);
* `reap_sandbox_folders()`: the sandbox folders of dead process groups removed (each sweep);
* `report()`: each host writes what it found to Redis (one key per host, expiring after a few sweep
  intervals, so a host that stopped reporting drops out), from every sweep and every refusal;
* `reports()`: what the hosts said, for /healthz and `manage.py queue_status`.

A host can be broken with room to spare (scratch on a read-only file system
failed every job in 0.1 s, "could not set up the sandbox: EROFS", and took 17 of 20 evaluations
within a minute, burning everyone's attempts). So:

* `shortage()` also writes a small file in each folder (`evaluation.sandbox.host_errors.write_fails`);
* `note_failure()` counts the evaluations in a row that ended in this host's infrastructure errors
  (a Redis hash per host, evaluation id -> attempts burned; `note_verdict()` clears it): at
  EVAL_HOST_FAILURE_LIMIT distinct ones the host is *sick* for EVAL_HOST_SICK_S (then it tries one
  evaluation again; one more failure makes it sick at once);
* `refusal()` (shortage, or sick) is what the worker checks before it takes a job from Redis
  (leaderboard.evaluations.rq_worker): a refusing host stops claiming, and the attempts it burned
  are given back (`give_back()`, attempts.give_back_attempts); a `failed` row that got attempts
  back is retried once a healthy host sweeps (sweep.retry_given_back).
"""

from __future__ import annotations

import json
import logging
import os
import re
import socket
from dataclasses import asdict, dataclass
from typing import Any

from django.conf import settings
from django.utils import timezone

from evaluation.builds.cache_evict import evict
from evaluation.results.types import default_build_cache_dir
from evaluation.sandbox.host_errors import free_mb, host_error, low_space, scratch_root, write_fails
from evaluation.sandbox.isolation import work_root
from evaluation.sandbox.orphans import remove_orphaned_trees
from leaderboard.evaluations.attempts import give_back_attempts
from leaderboard.evaluations.clock import db_now
from leaderboard.evaluations.queue import redis_connection

log = logging.getLogger(__name__)

KEY_PREFIX = "kb:eval-host-space:"
STREAK_PREFIX = "kb:eval-host-streak:"  # hash: evaluation id -> attempts ended by this host's errors
SICK_PREFIX = "kb:eval-host-sick:"  # why the host stopped claiming (expires after EVAL_HOST_SICK_S)
STREAK_TTL_S = 86400


@dataclass(frozen=True)
class HostSpace:
    host: str
    free_mb: dict[str, float]  # folder label -> MB free
    floor_mb: int
    shortage: str  # empty when every folder has room (and takes a write)
    at: str  # ISO time of the report
    sick: str = ""  # why the host stopped claiming besides space (its infrastructure errors in a row)

    @property
    def low(self) -> bool:
        return bool(self.shortage)

    @property
    def refusing(self) -> bool:
        """The host takes no job (short of space, a failed write probe, or sick)."""
        return bool(self.shortage or self.sick)

    @property
    def reason(self) -> str:
        return self.shortage or self.sick


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
    """Why this host must not start an evaluation now ('' when it has room and its folders take a
    write: a read-only or failing file system has room and still fails every evaluation)."""
    return low_space(evaluation_folders(), settings.EVAL_MIN_FREE_MB) or probe_failure()


#: The write probe: one block, synced. It finds a read-only or failing file system; space is the
#: floor's business (EVAL_MIN_FREE_MB), and a nearly full disk is left to fail the evaluation itself.
PROBE_WRITE_BYTES = 4096


def probe_failure() -> str:
    """The host's reason when the scratch folder or the build cache cannot be written ('' if both can)."""
    for label, path in evaluation_folders().items():
        try:
            os.makedirs(path, exist_ok=True)
        except OSError as exc:
            reason = host_error(exc)
        else:
            reason = write_fails(path, PROBE_WRITE_BYTES)
        if reason:
            # Without the probe's own file, whose name is new at every probe: the same fault reads
            # the same, so a refusing worker says it once.
            return f"the {label} folder {path} fails a write: {_PROBE_FILE.sub('', reason)}"
    return ""


_PROBE_FILE = re.compile(r" \([^()]*/\.kb-space-probe-[^()/]*\)")


def steady(reason: str) -> str:
    """A refusal's reason with its figures left out (MB free, seconds, times): two reasons that
    differ only there are one fault, logged and reported once."""
    return re.sub(r"\d+(?:[.:]\d+)*", "#", reason)


def reap_sandbox_folders() -> list[str]:
    """Remove the sandbox folders (`kb-eval-g<pgid>-*`, in the scratch folder and /dev/shm) of
    process groups that no longer exist: a worker killed whole leaves its horse's, and a scratch
    folder that was read-only the one of the evaluation it failed. A folder whose group still runs
    is a live evaluation and stays, and so does one younger than EVAL_STALE_AFTER_S (the sweeper
    child runs it each sweep)."""
    removed = remove_orphaned_trees(settings.EVAL_STALE_AFTER_S)
    for path in removed:
        log.warning("removed %s, a sandbox folder whose processes are gone", path)
    return removed


def host_name() -> str:
    """This worker host's name in its reports: EVAL_HOST_NAME, else the hostname."""
    return settings.EVAL_HOST_NAME or socket.gethostname()


def sick() -> str:
    """Why this host stopped claiming after its infrastructure errors ('' when it has not)."""
    try:
        raw = redis_connection().get(SICK_PREFIX + host_name())
    except Exception as exc:  # the worker's own Redis trouble shows elsewhere
        log.warning("could not read this host's health from Redis: %s", exc)
        return ""
    return raw.decode() if raw else ""


def refusal() -> str:
    """Why this host must take no evaluation now ('' when it may): space below EVAL_MIN_FREE_MB, a
    folder that fails a write, sickness. The worker checks it before it takes a job from Redis, so
    a host that cannot run one leaves it to the hosts that can."""
    return shortage() or sick()


def note_failure(evaluation_id: int, reason: str) -> bool:
    """An attempt here ended in this host's infrastructure error. True when that made the host
    sick (EVAL_HOST_FAILURE_LIMIT distinct evaluations in a row); its burned attempts are then given back."""
    conn, host = redis_connection(), host_name()
    pipe = conn.pipeline()
    pipe.hincrby(STREAK_PREFIX + host, str(evaluation_id), 1)
    pipe.expire(STREAK_PREFIX + host, STREAK_TTL_S)
    pipe.hlen(STREAK_PREFIX + host)
    try:
        in_a_row = pipe.execute()[-1]
    except Exception as exc:  # the attempt is released already; the write probe still guards the host
        log.warning("could not count this host's infrastructure errors in Redis: %s", exc)
        return False
    if in_a_row < settings.EVAL_HOST_FAILURE_LIMIT:
        return False
    why = (
        f"{in_a_row} evaluations in a row ended in this host's infrastructure errors (last: {reason[:300]}); "
        f"no claims for {settings.EVAL_HOST_SICK_S} s from {db_now():%H:%M:%S}, then a fresh count"
    )
    conn.set(SICK_PREFIX + host, why, ex=max(1, settings.EVAL_HOST_SICK_S))
    log.warning("host %s stops claiming: %s", host, why)
    give_back(why)
    report()
    return True


def note_verdict() -> None:
    """An evaluation here reached a verdict: the host works; its streak of failures ends."""
    try:
        redis_connection().delete(STREAK_PREFIX + host_name(), SICK_PREFIX + host_name())
    except Exception as exc:
        log.warning("could not clear this host's failure streak in Redis: %s", exc)


def give_back(reason: str) -> int:
    """Give back the attempts this host's streak of infrastructure errors used up (it refuses work
    now: they were its fault, not the kernels'). Returns how many evaluations got some back."""
    conn, key = redis_connection(), STREAK_PREFIX + host_name()
    pipe = conn.pipeline()
    pipe.hgetall(key)
    pipe.delete(key)
    burned = {int(k): int(v) for k, v in pipe.execute()[0].items()}
    return give_back_attempts(burned, f"host {host_name()}: {reason}") if burned else 0


def measure() -> HostSpace:
    free: dict[str, float] = {}
    for label, path in evaluation_folders().items():
        try:
            free[label] = round(free_mb(path), 1)
        except OSError:
            free[label] = -1.0  # unreadable: shortage() names it
    return HostSpace(
        host=host_name(),
        free_mb=free,
        floor_mb=settings.EVAL_MIN_FREE_MB,
        shortage=shortage(),
        at=timezone.now().isoformat(),
        sick=sick(),
    )


def report(space: HostSpace | None = None) -> HostSpace:
    """Measure (unless given) and publish this host's free space; never raises for Redis trouble."""
    space = space or measure()
    ttl = max(60, 3 * settings.EVAL_SWEEP_INTERVAL_S)
    try:
        redis_connection().set(KEY_PREFIX + space.host, json.dumps(asdict(space)), ex=ttl)
    except Exception as exc:  # the sweep and the job go on without it
        log.warning("could not report free space to Redis: %s", exc)
    global _last_said
    said = steady(space.reason) if space.refusing else ""
    if said and said != _last_said:  # once per fault and process, not at every sweep
        log.warning("host %s: %s; no evaluation starts here until that is mended", space.host, space.reason)
    _last_said = said
    return space


_last_said = ""  # the last refusal report() logged in this process, figures left out (steady)


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
