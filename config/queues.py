"""The evaluation queues as django-rq sees them (settings.RQ_QUEUES).

One RQ queue per hardware class, named `eval-<hardware slug>` (`Hardware.queue_name`). The queues
listed in EVAL_QUEUES are declared, so the django-rq dashboard shows them; any other
`eval-<slug>` still resolves, to the same configuration, because a worker registers whatever
hardware it finds (`evalworker`) and an evaluation asked for on that hardware must reach it rather
than wait forever for a queue nobody declared; so does each hardware's `instruments-<slug>`, the
queue of the instruments run after a verdict. Any other unknown name is a KeyError, as django-rq
expects.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit, urlunsplit

QUEUE_NAME = re.compile(r"^eval-[a-z0-9][a-z0-9-]*$")
# The queue of the instruments run after a verdict (Hardware.instruments_queue_name), per hardware.
INSTRUMENTS_QUEUE_NAME = re.compile(r"^instruments-[a-z0-9][a-z0-9-]*$")


class QueueConfigs(dict[str, dict[str, Any]]):
    """RQ_QUEUES: the declared queues, plus every other `eval-<slug>` on demand."""

    def __init__(self, declared: dict[str, dict[str, Any]], eval_config: dict[str, Any]) -> None:
        super().__init__(declared)
        self.eval_config = eval_config

    def __missing__(self, name: str) -> dict[str, Any]:
        if isinstance(name, str) and (QUEUE_NAME.match(name) or INSTRUMENTS_QUEUE_NAME.match(name)):
            return dict(self.eval_config)
        raise KeyError(name)


def rq_queues(redis_url: str, eval_queues: list[str], job_timeout: int) -> QueueConfigs:
    """The `default` queue and every evaluation queue, all on one Redis with the job time limit."""
    config = {"URL": redis_url, "DEFAULT_TIMEOUT": job_timeout}
    return QueueConfigs({name: dict(config) for name in ["default", *eval_queues]}, config)


def next_redis_db(redis_url: str) -> str:
    """The same Redis, the next database number (`redis://h:6379/0` -> `redis://h:6379/1`): where
    the security counters live beside the queue (config/settings.py, COUNTERS_REDIS_URL)."""
    parts = urlsplit(redis_url)
    path = parts.path.strip("/")
    db = int(path) + 1 if path.isdigit() else 1
    return urlunsplit(parts._replace(path=f"/{db}"))
