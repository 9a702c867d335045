"""Writes while the queue's Redis is down: the write and sign-in limits count on that Redis (in the
next database number: leaderboard/ops/counters.py), and every write once answered a bare 500 while
it was away (2 of 2 submissions during a 20 s outage), against docs/workers.md's "the submission
is still saved; the sweep enqueues it". Now the limits count in the process meanwhile, saying so
once in the log, and the submission is saved, answered 202 and enqueued by the sweep once Redis is
back.

The counters' cache is configured exactly as config/settings.py configures it from REDIS_URL (read
from a fresh process), on a real redis-server that the test stops.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time

import pytest
from django.conf import settings as django_settings
from django.contrib.auth.models import User
from django.test import Client

from leaderboard.evaluations import queue as jobs
from leaderboard.evaluations.sweep import sweep_evaluations
from leaderboard.models import Evaluation
from leaderboard.ops import counters as counters_module
from leaderboard.ops import sign_in_limit
from tests.integration.conftest import CORRECT_KERNEL, RedisServer

from .fault_report import record

pytestmark = pytest.mark.timeout(120)


def production_counters_cache(redis_url: str) -> dict:
    """settings.CACHES["counters"] as config/settings.py builds it for a site whose REDIS_URL is this."""
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings", "REDIS_URL": redis_url}
    env.pop("COUNTERS_REDIS_URL", None)
    code = "import django, json; django.setup(); from django.conf import settings as s; print(json.dumps(s.CACHES['counters']))"
    done = subprocess.run([sys.executable, "-c", code], env=env, cwd=django_settings.BASE_DIR, capture_output=True,
                          text=True, timeout=60, check=True)  # fmt: skip
    return json.loads(done.stdout)


@pytest.fixture
def queue_redis(env, tmp_path, settings):
    """A queue Redis of the test's own (the session's one is shared), with the site's counters on
    it as production puts them, and this process's queue pointed at it."""
    server = RedisServer(tmp_path)
    server.start()
    settings.REDIS_URL = server.url
    jobs._redis.cache_clear()
    settings.CACHES = {**settings.CACHES, "counters": production_counters_cache(server.url)}
    _outage_over(0.0)
    yield server
    server.stop()
    jobs._redis.cache_clear()
    _outage_over(0.0)


def _outage_over(retry_at: float) -> None:
    """Set when this process tries the counters' Redis next (0: it is taken to be up)."""
    outage = getattr(counters_module, "outage", None)  # the code before the fix has none
    if outage is not None:
        outage.retry_at = retry_at


def test_writes_answer_while_the_queue_redis_is_down_and_the_sweep_enqueues_later(
    queue_redis, make_kernels, cpu, ingestor, token_client, caplog
):
    (kernel,) = make_kernels([CORRECT_KERNEL])
    User.objects.create_user("alice", password="a-long-pass-9Xq!")
    api = token_client(ingestor)
    data = {"problem": kernel.problem_id, "source": CORRECT_KERNEL, "hardware": "cpu", "model": kernel.run.model.name}
    assert api.post("/api/v1/submissions/", data, format="json").status_code == 202  # counted in Redis

    queue_redis.stop()
    caplog.set_level(logging.WARNING, logger="leaderboard.ops.counters")
    codes = [api.post("/api/v1/submissions/", data, format="json").status_code for _ in range(2)]
    # A page form (the write limit's middleware) that also counts a failed sign-in per username.
    sign_in = Client().post("/sign-in/", {"username": "alice", "password": "wrong"})

    assert codes == [202, 202]
    assert sign_in.status_code == 200 and sign_in_limit.failures("alice") == 1  # the form again, counted here
    waiting = Evaluation.objects.filter(state="queued").order_by("pk")
    assert waiting.count() == 3
    down_lines = [r for r in caplog.records if "does not answer" in r.getMessage()]
    assert len(down_lines) == 1, [r.getMessage() for r in caplog.records]

    queue_redis.start()
    jobs._redis.cache_clear()
    report = sweep_evaluations()
    held = set(jobs.eval_queue(cpu.queue_name).get_job_ids())
    assert report.redis_ok and {e.job_id for e in waiting} <= held
    _outage_over(time.monotonic())  # tried again now, not RETRY_S after the last failure
    assert api.post("/api/v1/submissions/", data, format="json").status_code == 202
    assert any("answers again" in r.getMessage() for r in caplog.records)
    record("2. writes while the queue's Redis is down", submissions=codes, sign_in=sign_in.status_code,
           log_lines=len(down_lines), enqueued_by_the_sweep=report.reenqueued)  # fmt: skip
