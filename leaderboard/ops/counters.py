"""Where the security counters live: the write limit (leaderboard.api.throttling) and the failed
sign-in limit (leaderboard.ops.sign_in_limit) count in the "counters" cache (config/settings.py),
a Redis that never evicts (the queue's, noeviction), not the web's cache. That cache is
allkeys-lru and anonymous visitors can fill it: 2,000 board requests evicted an admin's lockout and
the correct password signed in inside its window (issue 28, case 5). Counters are few (one per
user or address, one per username), small, and expire with their window.
"""

from __future__ import annotations

from django.core.cache import caches
from django.utils.connection import ConnectionProxy

COUNTERS_ALIAS = "counters"

# A proxy, as django.core.cache.cache is: each thread gets its own connection to the store.
counters = ConnectionProxy(caches, COUNTERS_ALIAS)
