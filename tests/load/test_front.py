"""The production front, live: nginx rendered from the shipped site/nginx/kernelbench.conf.template
before gunicorn with site/gunicorn.conf.py (issue 19 cases 4, 5 and 15).

- 40 clients trickling their headers do not stop /healthz (gunicorn alone, 2 workers x 2 threads,
  stops answering: benchmarks/hardening_replay.py prints both);
- behind the proxy a forged X-Forwarded-For buys no new allowance;
- two gunicorn instances on one host keep a control socket each.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import requests

from tests.integration.front_site import NGINX, Front, SlowClients, control_socket_owners, probe_healthz

pytestmark = pytest.mark.timeout(120)
ENV = {"DJANGO_SETTINGS_MODULE": "config.settings", "API_WRITE_RATE": "3/min", "DEBUG": "0",
       "ALLOWED_HOSTS": "127.0.0.1,localhost"}  # fmt: skip


@pytest.fixture(scope="module")
def front():
    if not Path(NGINX).exists():
        pytest.fail("nginx is not installed: `make setup-test` installs it (TEST_APT)")
    site = Front(dict(ENV)).start()
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


def test_two_instances_on_one_host_keep_their_own_control_sockets():
    """The site and `make bench-web` side by side (one var folder, two binds): each instance's
    control socket answers with its own master's pid."""
    started, answering = control_socket_owners()
    assert answering == started
