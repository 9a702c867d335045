"""/healthz: can this web process reach the database and Redis? JSON, 200 when both answer, 503
otherwise, with what each check found. For load balancers and uptime checks; public, cheap (one
`SELECT 1`, one PING), never cached. How long each check took and its error text (host names,
addresses) go to operators only (leaderboard.ops.clients.is_operator); others get ok or not."""

from __future__ import annotations

import time
from collections.abc import Callable

from django.conf import settings
from django.db import connection
from django.http import HttpRequest, JsonResponse
from django.views.decorators.cache import never_cache
from redis import Redis
from redis.exceptions import RedisError

from leaderboard.ops.clients import is_operator

CHECK_TIMEOUT_S = 2


def check_database() -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        cursor.fetchone()


def check_redis() -> None:
    client = Redis.from_url(settings.REDIS_URL, socket_connect_timeout=CHECK_TIMEOUT_S, socket_timeout=CHECK_TIMEOUT_S)
    try:
        client.ping()
    finally:
        client.close()


CHECKS: dict[str, Callable[[], None]] = {"database": check_database, "redis": check_redis}


def _run(check: Callable[[], None]) -> dict:
    start = time.perf_counter()
    try:
        check()
    except (RedisError, OSError, Exception) as exc:  # noqa: BLE001 - any failure is the answer
        return {"ok": False, "error": f"{type(exc).__name__}: {exc}"[:300], "ms": _ms(start)}
    return {"ok": True, "ms": _ms(start)}


def _ms(start: float) -> float:
    return round((time.perf_counter() - start) * 1000, 1)


@never_cache
def healthz(request: HttpRequest) -> JsonResponse:
    checks = {name: _run(check) for name, check in CHECKS.items()}
    healthy = all(result["ok"] for result in checks.values())
    if not is_operator(request):
        checks = {name: {"ok": result["ok"]} for name, result in checks.items()}
    return JsonResponse(
        {"status": "ok" if healthy else "unavailable", "checks": checks}, status=200 if healthy else 503
    )
