"""The production front, live: nginx rendered from the shipped site/nginx/kernelbench.conf.template
before gunicorn with site/gunicorn.conf.py (issue 19 cases 4, 5 and 15).

- 40 clients trickling their headers do not stop /healthz (gunicorn alone, 2 workers x 2 threads,
  stops answering: benchmarks/hardening_replay.py prints both);
- behind the proxy a forged X-Forwarded-For buys no new allowance;
- two gunicorn instances on one host keep a control socket each.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import requests
from gunicorn.ctl.client import ControlClient

from tests.integration.front_site import NGINX, REPO, Front, SlowClients, probe_healthz
from tests.integration.live_site import free_port, wait_for_port

pytestmark = pytest.mark.timeout(120)
ENV = {"DJANGO_SETTINGS_MODULE": "config.settings", "API_WRITE_RATE": "3/min", "DEBUG": "0",
       "ALLOWED_HOSTS": "127.0.0.1,localhost"}  # fmt: skip


@pytest.fixture(scope="module")
def front():
    if not Path(NGINX).exists():
        pytest.fail("nginx is not installed: `make setup-test` installs it (TEST_APT)")
    env = {**ENV}
    env.pop("DATABASE_URL", None)
    site = Front(env).start()
    yield site
    site.stop()


def test_slow_clients_do_not_stop_healthz_behind_the_shipped_proxy(front):
    with SlowClients(front.url, n=40):
        seconds = probe_healthz(front.url, probes=5, timeout=3.0)
    assert None not in seconds, f"/healthz while 40 clients trickle headers: {seconds} (None: no answer in 3 s)"


def test_a_forged_forwarded_for_buys_no_allowance_through_the_proxy(front):
    """Anonymous writes, each with a new X-Forwarded-For: nginx replaces the header with the peer it
    saw, TRUSTED_PROXY_COUNT=1 keys by it, and the 4th POST at 3/min is a 429. (POST /healthz: a
    write the limit counts like a sign-in's that needs no migrated database; the sign-in itself is
    tested in tests/api/test_client_address.py.)"""
    browser = requests.Session()
    browser.get(front.url + "/sign-in/", timeout=10)
    token = {"X-CSRFToken": browser.cookies["csrftoken"]}
    codes = [
        browser.post(
            front.url + "/healthz", headers={**token, "X-Forwarded-For": f"10.1.2.{i}"}, timeout=10
        ).status_code
        for i in range(5)
    ]
    assert codes == [200, 200, 200, 429, 429], codes


def _gunicorn(var_dir: Path, port: int) -> subprocess.Popen:
    env = {
        **os.environ,
        "KB_VAR_DIR": str(var_dir),
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "WEB_CONCURRENCY": "1",
    }
    command = [sys.executable, "-m", "gunicorn", "config.wsgi", "--config", "site/gunicorn.conf.py",
               "--bind", f"127.0.0.1:{port}"]  # fmt: skip
    return subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _answering_pid(path: Path, seconds: float = 30) -> int:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if path.exists():
            try:
                with ControlClient(str(path), timeout=5) as client:
                    return client.send_command("show stats")["pid"]
            except Exception:  # noqa: BLE001 - not listening yet
                pass
        time.sleep(0.1)
    raise AssertionError(f"no control socket answered at {path}")


def test_two_instances_on_one_host_keep_their_own_control_sockets():
    """The site and `make bench-web` side by side (one var folder, two binds): each instance's
    control socket answers with its own master's pid."""
    var_dir = Path(tempfile.mkdtemp(prefix="kb-ctl-"))  # short: a Unix socket's path holds 107 bytes
    ports = [free_port(), free_port()]
    procs = [_gunicorn(var_dir, port) for port in ports]
    try:
        for proc, port in zip(procs, ports, strict=True):
            wait_for_port(port, proc)
        for proc, port in zip(procs, ports, strict=True):
            assert _answering_pid(var_dir / "run" / f"gunicorn-127.0.0.1-{port}.ctl") == proc.pid
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait(timeout=30)
        shutil.rmtree(var_dir, ignore_errors=True)
