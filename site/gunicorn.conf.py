"""Gunicorn settings for the web process. Override any of them with GUNICORN_CMD_ARGS."""

import multiprocessing
import os
from pathlib import Path

workers = int(os.environ.get("WEB_CONCURRENCY", min(4, multiprocessing.cpu_count() * 2)))
threads = int(os.environ.get("WEB_THREADS", 2))
timeout = 60
accesslog = "-"
errorlog = "-"
forwarded_allow_ips = os.environ.get("FORWARDED_ALLOW_IPS", "127.0.0.1")

# Prometheus metrics summed over the workers (prometheus_client's multi-process mode): each worker
# writes its counters to files in this directory and /metrics reads them all. prometheus_client
# reads the variable when first imported, so it is set here, in the master, before any worker
# loads the app. Nothing here imports prometheus_client before that.
os.environ.setdefault("PROMETHEUS_MULTIPROC_DIR", str(Path(__file__).resolve().parent.parent / "var" / "prometheus"))


def on_starting(server):
    """A fresh directory for each start: counts left by a previous master would be added to ours."""
    directory = Path(os.environ["PROMETHEUS_MULTIPROC_DIR"])
    directory.mkdir(parents=True, exist_ok=True)
    for stale in directory.glob("*.db"):
        stale.unlink()
    server.log.info("Prometheus multi-process metrics in %s", directory)


def child_exit(server, worker):
    """A dead worker's gauges no longer count (its counters and histograms still do)."""
    from prometheus_client import multiprocess  # deferred: the variable above must be set first

    multiprocess.mark_process_dead(worker.pid)
