"""System checks that fail early, with an id and a hint, when the environment is misconfigured."""

from __future__ import annotations

from urllib.parse import urlparse

from django.conf import settings
from django.core.checks import Error, Warning, register

from config.queues import QUEUE_NAME


@register()
def check_queue_settings(app_configs, **kwargs):
    return [*_redis_url_problems(), *_queue_name_problems(), *_size_problems()]


def _redis_url_problems() -> list[Error]:
    problems = []
    if urlparse(settings.REDIS_URL).scheme not in ("redis", "rediss", "unix"):
        problems.append(
            Error(
                f"REDIS_URL={settings.REDIS_URL!r} is not a Redis URL.",
                hint="Use redis://host:port/db, rediss://... or unix:///path/to/socket.",
                id="kb.E001",
            )
        )
    # Evaluation jobs go through REDIS_URL (leaderboard.evaluations.queue.redis_connection): a queue
    # configured elsewhere would split the jobs between two Redis servers.
    for name, config in settings.RQ_QUEUES.items():
        if QUEUE_NAME.match(name) and config.get("URL", settings.REDIS_URL) != settings.REDIS_URL:
            problems.append(
                Error(
                    f"RQ_QUEUES[{name!r}] uses {config.get('URL')!r}, not REDIS_URL.",
                    hint="Build RQ_QUEUES from REDIS_URL (config.queues.rq_queues), as config/settings.py does.",
                    id="kb.E003",
                )
            )
    return problems


def _queue_name_problems() -> list[Error]:
    problems = []
    for name in settings.EVAL_QUEUES:
        if not QUEUE_NAME.match(name):
            problems.append(
                Error(
                    f"EVAL_QUEUES holds {name!r}, which is not eval-<hardware slug>.",
                    hint="Name each queue after the hardware it serves, e.g. eval-h200.",
                    id="kb.E002",
                )
            )
    return problems


def _size_problems() -> list[Warning]:
    problems = []
    if settings.KERNEL_SOURCE_MAX_BYTES > settings.DATA_UPLOAD_MAX_MEMORY_SIZE:
        problems.append(
            Warning(
                "KERNEL_SOURCE_MAX_BYTES exceeds DATA_UPLOAD_MAX_MEMORY_SIZE: large kernels will be refused early.",
                hint="Raise DATA_UPLOAD_MAX_MEMORY_SIZE or lower KERNEL_SOURCE_MAX_BYTES.",
                id="kb.W001",
            )
        )
    # The site-wide body cap (config.middleware.limit_request_body) runs before any route's own.
    route_caps = {
        "RUN_UPLOAD_MAX_BYTES": settings.RUN_UPLOAD_MAX_BYTES,
        "API_TABLE_MAX_BYTES": settings.API_TABLE_MAX_BYTES,
        "API_BODY_MAX_BYTES": settings.API_BODY_MAX_BYTES,
    }
    over = [name for name, cap in route_caps.items() if cap > settings.REQUEST_BODY_MAX_BYTES]
    if over:
        problems.append(
            Warning(
                f"REQUEST_BODY_MAX_BYTES is below {', '.join(over)}: such bodies get the site-wide 413 first.",
                hint="Raise REQUEST_BODY_MAX_BYTES to at least the largest route cap.",
                id="kb.W002",
            )
        )
    return problems


@register(deploy=True)
def check_hardening_settings(app_configs, **kwargs):
    """`check --deploy`: the write limit must be shared by every process, and pages need a CSP."""
    problems = []
    if "LocMemCache" in settings.CACHES["default"]["BACKEND"]:
        problems.append(
            Warning(
                "The cache is local memory: each gunicorn worker counts the write limit on its own.",
                hint="Set REDIS_URL in the environment; the cache (and so API_WRITE_RATE) then lives in Redis.",
                id="kb.W010",
            )
        )
    if getattr(settings, "CACHE_REDIS_URL", "") == settings.REDIS_URL:
        problems.append(
            Warning(
                "The cache shares the evaluation queue's Redis (CACHE_REDIS_URL is REDIS_URL): visitors who fill "
                "the cache fill the queue's memory too.",
                hint="Give the cache a Redis of its own with maxmemory and allkeys-lru (site/compose.yaml's "
                "redis-cache) and set CACHE_REDIS_URL to it; keep the queue's Redis on noeviction.",
                id="kb.W012",
            )
        )
    if settings.CACHE_REDIS_URL and settings.COUNTERS_REDIS_URL == settings.CACHE_REDIS_URL != settings.REDIS_URL:
        problems.append(
            Warning(
                "The security counters (write and sign-in limits) share the cache's Redis (COUNTERS_REDIS_URL is "
                "CACHE_REDIS_URL): when the cache fills, allkeys-lru evicts them and the limits reset.",
                hint="Leave COUNTERS_REDIS_URL unset (the queue's Redis, noeviction) or point it at a Redis that "
                "never evicts.",
                id="kb.W013",
            )
        )
    if not settings.CONTENT_SECURITY_POLICY:
        problems.append(
            Warning(
                "CONTENT_SECURITY_POLICY is empty: pages are served without a Content-Security-Policy.",
                hint="Use config.settings_production, or set CONTENT_SECURITY_POLICY.",
                id="kb.W011",
            )
        )
    return problems
