"""Gunicorn settings for the web process. Override any of them with GUNICORN_CMD_ARGS.

Several instances may run on one host (the site, `make bench-web`, a test): each keeps what it
owns under its own var folder (KB_VAR_DIR, else the checkout's var/), and its control socket is
named after its bind too, so that one never takes another's.
"""

import hashlib
import multiprocessing
import os
import re
from pathlib import Path

from gunicorn.config import _get_default_control_socket

workers = int(os.environ.get("WEB_CONCURRENCY", min(4, multiprocessing.cpu_count() * 2)))
threads = int(os.environ.get("WEB_THREADS", 2))
timeout = 60
accesslog = "-"
errorlog = "-"
forwarded_allow_ips = os.environ.get("FORWARDED_ALLOW_IPS", "127.0.0.1")

VAR_DIR = Path(os.environ.get("KB_VAR_DIR") or Path(__file__).resolve().parent.parent / "var")
UNIX_PATH_MAX = 107  # sun_path holds 108 bytes, the last one NUL

# Prometheus metrics summed over the workers (prometheus_client's multi-process mode): each worker
# writes its counters to files in this directory and /metrics reads them all. prometheus_client
# reads the variable when first imported, so it is set here, in the master, before any worker
# loads the app (or the master does, with --preload). Nothing here imports prometheus_client.
os.environ.setdefault("PROMETHEUS_MULTIPROC_DIR", str(VAR_DIR / "prometheus"))


def instance_name(server) -> str:
    """The instance's bind as a file name: 127.0.0.1-8000, unix-srv-kb.sock."""
    return re.sub(r"[^A-Za-z0-9.]+", "-", "_".join(server.cfg.bind)).strip("-") or "default"


def control_socket_path(name: str) -> str | None:
    """<var>/run/gunicorn-<bind>.ctl; a hashed name where that is too long for a Unix socket; None
    (no control socket) where even that is."""
    run = VAR_DIR / "run"
    for candidate in (run / f"gunicorn-{name}.ctl", run / f"g-{hashlib.sha256(name.encode()).hexdigest()[:12]}.ctl"):
        if len(os.fsencode(candidate)) <= UNIX_PATH_MAX:
            return str(candidate)
    return None


def _per_instance_control_socket(server, name: str) -> None:
    # gunicorn's default is one path per user ($XDG_RUNTIME_DIR/gunicorn.ctl or ~/.gunicorn/):
    # a second instance would take the first one's, and `gunicornc reload` would reach the wrong
    # site. An explicit --control-socket is kept.
    if server.cfg.control_socket_disable or server.cfg.control_socket != _get_default_control_socket():
        return
    path = control_socket_path(name)
    if path is None:
        server.cfg.set("control_socket_disable", True)
        server.log.warning("No control socket: the var folder's path is too long for a Unix socket")
        return
    Path(path).parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    server.cfg.set("control_socket", path)


def on_starting(server):
    """The instance's control socket, and a fresh metrics directory: counts left by a previous
    master would be added to ours. (The control server starts after this hook.)"""
    _per_instance_control_socket(server, instance_name(server))
    directory = Path(os.environ["PROMETHEUS_MULTIPROC_DIR"])
    directory.mkdir(parents=True, exist_ok=True)
    for stale in directory.glob("*.db"):
        stale.unlink()
    server.log.info(
        "Prometheus multi-process metrics in %s; control socket %s",
        directory,
        "off" if server.cfg.control_socket_disable else server.cfg.control_socket,
    )


def child_exit(server, worker):
    """A dead worker's gauges no longer count (its counters and histograms still do)."""
    from prometheus_client import multiprocess  # deferred: the variable above must be set first

    multiprocess.mark_process_dead(worker.pid)
