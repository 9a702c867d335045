"""/healthz and /metrics against a real Redis (issue 14.8)."""

from __future__ import annotations

import re

from leaderboard.models import Evaluation

from .conftest import CORRECT_KERNEL, free_port, submit


def metric(text: str, name: str, **labels: str) -> float | None:
    """The value of one sample in Prometheus' text format (labels in any order), or None."""
    for line in text.splitlines():
        found = re.match(r"^([a-z_]+)(?:\{(.*)\})? (\S+)$", line)
        if found and found.group(1) == name and dict(re.findall(r'(\w+)="([^"]*)"', found.group(2) or "")) == labels:
            return float(found.group(3))
    return None


def test_healthz_is_200_when_the_database_and_redis_answer(env, client):
    response = client.get("/healthz")
    assert response.status_code == 200 and response["Cache-Control"].startswith("max-age=0")
    body = response.json()
    assert body["status"] == "ok" and body["checks"]["database"]["ok"] and body["checks"]["redis"]["ok"]


def test_healthz_is_503_naming_redis_when_redis_is_down(env, client, settings):
    settings.REDIS_URL = f"redis://127.0.0.1:{free_port()}/0"
    response = client.get("/healthz")
    assert response.status_code == 503
    body = response.json()
    assert body["status"] == "unavailable" and body["checks"]["database"]["ok"] is True
    assert body["checks"]["redis"]["ok"] is False and "Connection" in body["checks"]["redis"]["error"]


def test_metrics_count_evaluations_by_state_and_the_queues(env, client, make_kernels, cpu):
    submit(make_kernels([CORRECT_KERNEL, CORRECT_KERNEL]), cpu)
    Evaluation.objects.filter(pk=Evaluation.objects.order_by("pk").first().pk).update(state="running")
    client.get("/healthz")
    text = client.get("/metrics").content.decode()
    assert metric(text, "kb_evaluations", state="queued") == 1
    assert metric(text, "kb_evaluations", state="running") == 1
    assert metric(text, "kb_queue_up") == 1
    assert metric(text, "kb_queue_length", queue="eval-cpu") == 2  # Redis holds both jobs
    assert (metric(text, "kb_http_requests_total", method="GET", view="healthz", status="200") or 0) >= 1
    assert metric(text, "kb_evaluation_duration_seconds_count") == 0


def test_metrics_say_when_redis_cannot_be_read(env, client, settings):
    from leaderboard.evaluations import queue as jobs  # deferred: its connection cache is per URL

    settings.REDIS_URL = f"redis://127.0.0.1:{free_port()}/0"
    jobs._redis.cache_clear()
    text = client.get("/metrics").content.decode()
    assert metric(text, "kb_queue_up") == 0 and metric(text, "kb_evaluations", state="done") == 0
