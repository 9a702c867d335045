"""Gunicorn settings for the web process. Override any of them with GUNICORN_CMD_ARGS."""

import multiprocessing
import os

workers = int(os.environ.get("WEB_CONCURRENCY", min(4, multiprocessing.cpu_count() * 2)))
threads = int(os.environ.get("WEB_THREADS", 2))
timeout = 60
accesslog = "-"
errorlog = "-"
forwarded_allow_ips = os.environ.get("FORWARDED_ALLOW_IPS", "127.0.0.1")
