"""/metrics with several web processes (prometheus_client's multi-process mode, as under
gunicorn with site/gunicorn.conf.py): real processes write their counters to the directory and
the view sums them, dead workers included."""

from __future__ import annotations

import os
import runpy
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from gunicorn.config import Config

from tests.integration.conftest import free_port
from tests.integration.test_ops import metric

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parents[2]

# One "worker": Django set up as under gunicorn, counting `n` requests to a view no test serves.
WORKER = """
import sys, django
django.setup()
from leaderboard.ops.metrics import REQUESTS, REQUEST_SECONDS
for _ in range(int(sys.argv[1])):
    REQUESTS.labels("GET", "worker-only", "200").inc()
    REQUEST_SECONDS.labels("GET", "worker-only").observe(0.01)
"""


def run_worker(directory: Path, n: int) -> None:
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(directory), "DJANGO_SETTINGS_MODULE": "config.settings"}
    subprocess.run([sys.executable, "-c", WORKER, str(n)], cwd=ROOT, env=env, check=True, timeout=120)


def test_the_view_sums_every_workers_counts(client, settings, tmp_path):
    run_worker(tmp_path, 3)
    run_worker(tmp_path, 4)
    assert len(list(tmp_path.glob("counter_*.db"))) == 2  # two processes, one file each
    settings.PROMETHEUS_MULTIPROC_DIR = str(tmp_path)
    text = client.get("/metrics").content.decode()
    assert metric(text, "kb_http_requests_total", method="GET", view="worker-only", status="200") == 7
    assert metric(text, "kb_http_request_duration_seconds_count", method="GET", view="worker-only") == 7
    assert metric(text, "kb_evaluations", state="done") == 0  # the database's metrics are still there


def test_without_the_directory_the_view_shows_its_own_process(client, settings, tmp_path):
    run_worker(tmp_path, 5)
    settings.PROMETHEUS_MULTIPROC_DIR = ""
    text = client.get("/metrics").content.decode()
    assert metric(text, "kb_http_requests_total", method="GET", view="worker-only", status="200") is None


def test_gunicorn_config_sets_a_fresh_directory_and_marks_dead_workers(tmp_path, monkeypatch):
    directory = tmp_path / "prometheus"
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(directory))
    monkeypatch.setenv("KB_VAR_DIR", str(tmp_path / "var"))
    config = runpy.run_path(str(ROOT / "site" / "gunicorn.conf.py"))
    directory.mkdir()
    (directory / "counter_1.db").write_bytes(b"left by an earlier start")

    class Server:  # what the hooks use of gunicorn's Arbiter and Worker
        cfg = Config()
        cfg.set("bind", ["127.0.0.1:8123"])

        class log:
            @staticmethod
            def info(*args):
                pass

    class Worker:
        pid = 4242

    config["on_starting"](Server)
    assert list(directory.iterdir()) == []
    (directory / "gauge_livesum_4242.db").write_bytes(b"")
    (directory / "counter_4242.db").write_bytes(b"")
    config["child_exit"](Server, Worker)
    assert [p.name for p in directory.iterdir()] == ["counter_4242.db"]  # counts of the dead worker stay
    # Its own path for this bind (hashed where a deep temporary folder makes it too long for a socket).
    assert Server.cfg.control_socket == config["control_socket_path"]("127.0.0.1-8123")
    assert Path(Server.cfg.control_socket).parent == tmp_path / "var" / "run"


def test_a_control_socket_path_too_long_for_unix_sockets_is_hashed(monkeypatch, tmp_path):
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path))  # the config sets it by default; undone after
    monkeypatch.setenv("KB_VAR_DIR", "/tmp/" + "v" * 60)
    config = runpy.run_path(str(ROOT / "site" / "gunicorn.conf.py"))
    path = config["control_socket_path"]("unix-" + "s" * 80 + ".sock")
    assert path is not None and len(path) <= 107 and path.startswith("/tmp/" + "v" * 60 + "/run/g-")
    monkeypatch.setenv("KB_VAR_DIR", "/tmp/" + "v" * 120)
    assert runpy.run_path(str(ROOT / "site" / "gunicorn.conf.py"))["control_socket_path"]("x") is None


def test_gunicorn_config_defaults_to_a_directory_under_var(monkeypatch):
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", "")  # so that the undo removes what the config sets
    monkeypatch.delenv("PROMETHEUS_MULTIPROC_DIR")
    monkeypatch.delenv("KB_VAR_DIR", raising=False)
    runpy.run_path(str(ROOT / "site" / "gunicorn.conf.py"))
    assert os.environ["PROMETHEUS_MULTIPROC_DIR"] == str(ROOT / "var" / "prometheus")


def test_gunicorn_with_two_workers_reports_every_request(tmp_path):
    """The real thing: gunicorn with site/gunicorn.conf.py and two workers; whichever worker
    answers a scrape, it counts the requests both workers served."""
    env = {
        **os.environ,
        "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
        "PROMETHEUS_MULTIPROC_DIR": str(tmp_path / "prometheus"),
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "WEB_CONCURRENCY": "2",
    }
    env.pop("REDIS_URL", None)
    migrate_env = {k: v for k, v in env.items() if k != "PROMETHEUS_MULTIPROC_DIR"}  # gunicorn makes the directory
    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, env=migrate_env, check=True, timeout=120)
    url = f"http://127.0.0.1:{free_port()}"
    command = [sys.executable, "-m", "gunicorn", "config.wsgi", "--config", "site/gunicorn.conf.py"]
    server = subprocess.Popen(
        [*command, "--bind", url.removeprefix("http://")], cwd=ROOT, env=env, stderr=subprocess.DEVNULL
    )
    try:
        # Up to 30 s for the workers to boot, asked on /healthz (503 without Redis: an answer all the
        # same): on a loaded host a first /metrics once timed out here after it was served, was asked
        # again, and the count below was one short.
        for _ in range(300):
            try:
                urllib.request.urlopen(url + "/healthz", timeout=5).read()
                break
            except urllib.error.HTTPError:
                break
            except OSError:
                time.sleep(0.1)
        served = 0
        while served == 0 or (len(list((tmp_path / "prometheus").glob("counter_*.db"))) < 2 and served < 200):
            urllib.request.urlopen(url + "/metrics", timeout=5).read()  # one connection each: workers take turns
            served += 1
        text = urllib.request.urlopen(url + "/metrics", timeout=5).read().decode()
    finally:
        server.terminate()
        server.wait(timeout=30)
    assert len(list((tmp_path / "prometheus").glob("counter_*.db"))) == 2, "both workers served"
    # The scrape counts every earlier one, whichever worker served it (itself is counted after).
    assert metric(text, "kb_http_requests_total", method="GET", view="metrics", status="200") == served
