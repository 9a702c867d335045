"""System checks that fail early, with an id and a hint, when the environment is misconfigured."""

from __future__ import annotations

import re
from urllib.parse import urlparse

from django.conf import settings
from django.core.checks import Error, Warning, register

QUEUE_NAME = re.compile(r"^eval-[a-z0-9][a-z0-9-]*$")


@register()
def check_queue_settings(app_configs, **kwargs):
    problems = []
    if urlparse(settings.REDIS_URL).scheme not in ("redis", "rediss", "unix"):
        problems.append(
            Error(
                f"REDIS_URL={settings.REDIS_URL!r} is not a Redis URL.",
                hint="Use redis://host:port/db, rediss://... or unix:///path/to/socket.",
                id="kb.E001",
            )
        )
    for name in settings.EVAL_QUEUES:
        if not QUEUE_NAME.match(name):
            problems.append(
                Error(
                    f"EVAL_QUEUES holds {name!r}, which is not eval-<hardware slug>.",
                    hint="Name each queue after the hardware it serves, e.g. eval-h200.",
                    id="kb.E002",
                )
            )
    if settings.KERNEL_SOURCE_MAX_BYTES > settings.DATA_UPLOAD_MAX_MEMORY_SIZE:
        problems.append(
            Warning(
                "KERNEL_SOURCE_MAX_BYTES exceeds DATA_UPLOAD_MAX_MEMORY_SIZE: large kernels will be refused early.",
                hint="Raise DATA_UPLOAD_MAX_MEMORY_SIZE or lower KERNEL_SOURCE_MAX_BYTES.",
                id="kb.W001",
            )
        )
    return problems
