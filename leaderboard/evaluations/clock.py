"""One clock for the fleet: the database's.

Staleness (a heartbeat older than EVAL_STALE_AFTER_S), backoff (`not_before`) and every timestamp
another host compares with are read from the database server, never from the host that writes or
compares them. A sweeper whose clock ran 10 minutes ahead once released every live attempt on its
first sweep (their heartbeats, written by other hosts, looked 10 minutes old) and wrote `not_before`
10 minutes late; a host behind would keep dead attempts and claim retries early.

PostgreSQL: `statement_timestamp()` (the time of this statement, not of the transaction, so that a
long transaction does not freeze it). SQLite lives on one host: its own `'now'` (the C library's
clock, not Python's), in the text form Django stores.
"""

from __future__ import annotations

from datetime import UTC, datetime

from django.db import connection
from django.utils import timezone


def db_now() -> datetime:
    """Now, by the database's clock (aware, UTC)."""
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SELECT statement_timestamp()")
            value = cursor.fetchone()[0]
            return value.astimezone(UTC)
        if connection.vendor == "sqlite":
            cursor.execute("SELECT strftime('%Y-%m-%d %H:%M:%f', 'now')")
            text = cursor.fetchone()[0]
            return datetime.strptime(text, "%Y-%m-%d %H:%M:%S.%f").replace(tzinfo=UTC)
    return timezone.now()  # another backend: the host's clock, as before
