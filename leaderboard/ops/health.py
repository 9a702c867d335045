"""/healthz: can this web process reach the database and Redis? JSON, 200 when both answer, 503
otherwise, with what each check found. For load balancers and uptime checks; public, cheap (one
`SELECT 1`, one PING, one scan of the worker hosts' space reports), never cached. How long each
check took and its error text (host names, addresses) go to operators only
(leaderboard.ops.clients.is_operator); others get ok or not.

`evaluation_hosts` says whether some worker host is short of disk space (status "degraded", still
200: the site serves, but evaluations wait there); operators see which host and why. `boards` says
whether some run failed to score and was set aside (leaderboard.boards.rescoring.set_aside: its
board rows are stale; status "degraded"), or, where the site runs the boards' background re-scorer,
whether a mark has waited more than a minute for it (it is not running); operators see which runs
and why."""

from __future__ import annotations

import time
from collections.abc import Callable

from django.conf import settings
from django.db import connection
from django.http import HttpRequest, JsonResponse
from django.views.decorators.cache import never_cache
from redis import Redis
from redis.exceptions import RedisError

from leaderboard.boards import stored as board_stored
from leaderboard.evaluations import host_space
from leaderboard.ops.clients import is_operator
from leaderboard.ops.outage import RETRY_AFTER_S

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


RESCORER_LATE_S = 60  # the re-scorer takes a mark within a second when it runs


def evaluation_hosts() -> dict:
    """Worker hosts short of disk space (they start no evaluation: leaderboard/evaluations/host_space.py).
    Reported, not failed: the site itself still serves."""
    try:
        hosts = host_space.reports()
    except Exception as exc:  # noqa: BLE001 - Redis trouble is the redis check's to report
        return {"ok": None, "error": f"{type(exc).__name__}: {exc}"[:300]}
    low = [{"host": h.host, "reason": h.shortage, "at": h.at} for h in hosts if h.low]
    # Short of space, a folder failing a write, or sick after its infrastructure errors in a row.
    refusing = [{"host": h.host, "reason": h.reason, "at": h.at} for h in hosts if h.refusing]
    return {
        "ok": not refusing,
        "hosts": len(hosts),
        "low_disk": low,
        "not_claiming": refusing,
        "floor_mb": settings.EVAL_MIN_FREE_MB,
    }


def boards() -> dict:
    """Runs set aside because they fail to score: the boards serve their last stored scores. And how
    long the oldest mark has waited for its re-scoring: longer than RESCORER_LATE_S, nothing is
    re-scoring it (the re-scorer is not running, or a writer's own re-scoring after its commit
    failed, where none runs), and pages keep serving the stored rows, since reads never re-score."""
    try:
        aside = board_stored.set_aside_runs()
        waiting = board_stored.oldest_mark_seconds()
    except Exception as exc:  # noqa: BLE001 - the database check reports the database
        return {"ok": None, "error": f"{type(exc).__name__}: {exc}"[:300]}
    shown = [{"run": row.run_id, "at": row.failed_at.isoformat(), "error": row.error[:300]} for row in aside[:20]]
    late = waiting > RESCORER_LATE_S
    return {
        "ok": not aside and not late, "runs_set_aside": len(aside), "set_aside": shown,
        "oldest_mark_waiting_s": round(waiting, 1),
    }  # fmt: skip


@never_cache
def healthz(request: HttpRequest) -> JsonResponse:
    checks = {name: _run(check) for name, check in CHECKS.items()}
    healthy = all(result["ok"] for result in checks.values())
    hosts = evaluation_hosts() if checks["redis"]["ok"] else {"ok": None, "error": "Redis unreachable"}
    read_model = boards() if checks["database"]["ok"] else {"ok": None, "error": "database unreachable"}
    degraded = hosts["ok"] is False or read_model["ok"] is False
    status = "unavailable" if not healthy else "degraded" if degraded else "ok"
    if not is_operator(request):
        checks = {name: {"ok": result["ok"]} for name, result in checks.items()}
        hosts, read_model = {"ok": hosts["ok"]}, {"ok": read_model["ok"]}
    response = JsonResponse(
        {"status": status, "checks": checks, "evaluation_hosts": hosts, "boards": read_model},
        status=200 if healthy else 503,
    )
    if not healthy:
        response["Retry-After"] = str(RETRY_AFTER_S)  # as the outage pages say (leaderboard/ops/outage.py)
    return response
