"""`make run` (site/run-local.sh) never shares a queue or a cache with a Redis some other process
already runs on its port (issue 30: two checkouts on one machine shared eval-cpu and the board
cache). Tests site/local-redis.sh, the part of the script that picks the Redis, against a real
foreign redis-server."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import redis

from tests.integration.conftest import REDIS_SERVER, REPO, RedisServer

pytestmark = pytest.mark.skipif(not os.path.exists(REDIS_SERVER), reason="redis-server is not installed")

# Start the Redis the way run-local.sh does, say what was picked, stop it again.
PICK = """
set -euo pipefail
source site/local-redis.sh
REDIS_PID=""
start_local_redis "$RUN_DIR" || exit 1
echo "URL=$REDIS_URL PID=$REDIS_PID KEY=$(redis-cli -u "$REDIS_URL" get foreign-job)"
[ -n "$REDIS_PID" ] && kill -TERM "$REDIS_PID"
exit 0
"""


def _pick(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "REDIS_PORT")}
    return subprocess.run(
        ["bash", "-c", PICK],
        cwd=REPO,
        env={**clean, "RUN_DIR": str(tmp_path), "PY": sys.executable, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.fixture
def foreign(tmp_path_factory):
    """Another site's Redis, holding a job of its own."""
    server = RedisServer(tmp_path_factory.mktemp("foreign"))
    server.start()
    redis.Redis.from_url(server.url).set("foreign-job", "1")
    yield server
    server.stop()


@pytest.fixture
def foreign_on_6379(tmp_path_factory):
    """Port 6379 held by a Redis that is not ours: the test's own, or whoever already holds it."""
    server = RedisServer(tmp_path_factory.mktemp("foreign6379"))
    server.port, server.url = 6379, "redis://127.0.0.1:6379/0"
    try:
        server.start()
        redis.Redis.from_url(server.url).set("foreign-job", "1")
    except (RuntimeError, redis.RedisError):
        pass  # somebody else's process listens there already: just as foreign
    yield
    server.stop()


def test_a_taken_default_port_gets_a_redis_of_our_own_elsewhere(tmp_path, foreign_on_6379):
    done = _pick(tmp_path)
    assert done.returncode == 0, done.stderr
    url, pid, key = re.search(r"URL=(\S+) PID=(\d+) KEY=(.*)", done.stdout).groups()
    assert ":6379/" not in url and "6379 is taken" in done.stdout
    assert key == ""  # a new, empty Redis: none of the other site's jobs


def test_a_taken_redis_port_is_refused_with_what_to_do(tmp_path, foreign):
    done = _pick(tmp_path, REDIS_PORT=str(foreign.port))
    assert done.returncode == 1
    assert f"REDIS_PORT={foreign.port} is taken" in done.stderr and "REDIS_URL" in done.stderr
    assert "URL=" not in done.stdout
    assert redis.Redis.from_url(foreign.url).get("foreign-job") == b"1"  # left alone


def test_a_free_redis_port_gets_our_redis_there(tmp_path, foreign):
    port = RedisServer(tmp_path).port  # a free one
    done = _pick(tmp_path, REDIS_PORT=str(port))
    assert done.returncode == 0, done.stderr
    assert f"URL=redis://127.0.0.1:{port}/0 PID=" in done.stdout


def test_redis_url_given_is_used_as_given_and_said(tmp_path, foreign):
    done = _pick(tmp_path, REDIS_URL=foreign.url)
    assert done.returncode == 0, done.stderr
    assert f"URL={foreign.url} PID= KEY=1" in done.stdout and "as given" in done.stdout
