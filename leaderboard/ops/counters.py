"""Where the security counters live: the write limit (leaderboard.api.throttling) and the failed
sign-in limit (leaderboard.ops.sign_in_limit) count in the "counters" cache (config/settings.py),
a Redis that never evicts (the queue's, noeviction), not the web's cache. That cache is
allkeys-lru and anonymous visitors can fill it: 2,000 board requests evicted an admin's lockout and
the correct password signed in inside its window. Counters are few (one per user or address, one
per username), small, and expire with their window.

That Redis can be down (a restart, an outage of the queue's host) while the database is up. A limit
is not worth a write: the submission is saved and the sweep enqueues it once Redis is back. So the
counters' backend (`CountersRedisCache`) fails over to a count of this process's own (local
memory) while its Redis does not answer, says so once in the log, tries Redis again every
`RETRY_S`, and says so again when it answers. Meanwhile each gunicorn process limits its own
share: a looser limit for the length of an outage, never a 500.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from django.core.cache import caches
from django.core.cache.backends.locmem import LocMemCache
from django.core.cache.backends.redis import RedisCache
from django.utils.connection import ConnectionProxy
from redis.exceptions import RedisError

COUNTERS_ALIAS = "counters"
#: Seconds between two tries of a Redis that did not answer (meanwhile: the local count at once).
RETRY_S = 5.0

log = logging.getLogger(__name__)

# A proxy, as django.core.cache.cache is: each thread gets its own connection to the store.
counters = ConnectionProxy(caches, COUNTERS_ALIAS)


class _Outage:
    """Whether the counters' Redis is taken to be down, for the whole process (Django makes one
    backend per thread; the outage and its one log line are the process's)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.retry_at = 0.0  # time.monotonic() before which Redis is not tried again; 0: up

    def skip_redis(self) -> bool:
        return self.retry_at > time.monotonic()

    def failed(self, location: str, exc: Exception) -> None:
        with self.lock:
            first = self.retry_at == 0.0
            self.retry_at = time.monotonic() + RETRY_S
        if first:
            log.warning(
                "the write and sign-in limits' Redis (%s) does not answer (%s: %s): counting in this "
                "process until it does",
                location,
                type(exc).__name__,
                exc,
            )

    def answered(self, location: str) -> None:
        if self.retry_at == 0.0:
            return
        with self.lock:
            was_down, self.retry_at = self.retry_at != 0.0, 0.0
        if was_down:
            log.warning("the write and sign-in limits' Redis (%s) answers again", location)


outage = _Outage()


def _or_local(name: str) -> Callable[..., Any]:
    def method(self: CountersRedisCache, *args: Any, **kwargs: Any) -> Any:
        if outage.skip_redis():
            return getattr(self.local, name)(*args, **kwargs)
        try:
            result = getattr(RedisCache, name)(self, *args, **kwargs)
        except RedisError as exc:
            outage.failed(self.location, exc)
            return getattr(self.local, name)(*args, **kwargs)
        outage.answered(self.location)
        return result

    method.__name__ = name
    method.__doc__ = f"RedisCache.{name}, or the local count's while Redis does not answer."
    return method


class CountersRedisCache(RedisCache):
    """Django's Redis cache that counts in local memory (one store per process) while Redis does
    not answer (refused, timed out, loading, read-only), instead of raising into the request."""

    def __init__(self, server: str, params: dict[str, Any]) -> None:
        super().__init__(server, params)
        self.location = server
        local = {key: params[key] for key in ("TIMEOUT", "KEY_PREFIX", "VERSION") if key in params}
        # One named store: every thread's backend of this process shares it (LocMemCache keeps
        # its data by name).
        self.local = LocMemCache(f"kb-counters-local:{server}", {**local, "OPTIONS": {"MAX_ENTRIES": 100_000}})

    add = _or_local("add")
    get = _or_local("get")
    set = _or_local("set")
    touch = _or_local("touch")
    delete = _or_local("delete")
    get_many = _or_local("get_many")
    has_key = _or_local("has_key")
    incr = _or_local("incr")
    set_many = _or_local("set_many")
    delete_many = _or_local("delete_many")
    clear = _or_local("clear")
