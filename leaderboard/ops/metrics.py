"""Prometheus metrics at /metrics (text exposition format, prometheus_client):

- kb_http_requests_total{method, view, status} and kb_http_request_duration_seconds{method, view}:
  counted by RequestMetricsMiddleware in each web process. Under gunicorn (site/gunicorn.conf.py
  sets PROMETHEUS_MULTIPROC_DIR) each worker writes them to files there and a scrape sums every
  worker's, dead ones included (prometheus_client's multi-process mode); without the variable a
  scrape sees the process that answers it;
- kb_evaluations{state}: evaluations by lifecycle state, from the database, at scrape time;
- kb_queue_length{queue}: jobs waiting in each evaluation queue of EVAL_QUEUES, from Redis (RQ's
  public Queue.count); kb_queue_up is 0 when Redis cannot be read;
- kb_evaluation_duration_seconds: a histogram of how long the last EVAL_DURATION_SAMPLE finished
  evaluations ran (started to finished), from the database.

Scrapes cost a few cheap queries. Per-view counts show when admins are at work, so only operators
read them (leaderboard.ops.clients.is_operator: METRICS_TOKEN, or the private network); others
get a 403 that says how to get in.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

from django.conf import settings
from django.db.models import Count
from django.http import HttpRequest, HttpResponse
from django.views.decorators.cache import never_cache
from prometheus_client import REGISTRY, CollectorRegistry, Counter, Histogram, generate_latest, multiprocess
from prometheus_client.core import GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.registry import Collector
from redis.exceptions import RedisError

from leaderboard.evaluations.queue import eval_queue
from leaderboard.models import DirtyRun, Evaluation
from leaderboard.ops.clients import is_operator

EVAL_DURATION_SAMPLE = 1000
DURATION_BUCKETS = (1, 5, 10, 30, 60, 120, 300, 600, 1800)

REQUESTS = Counter("kb_http_requests", "HTTP requests served", ["method", "view", "status"])
REQUEST_SECONDS = Histogram("kb_http_request_duration_seconds", "Time to serve a request", ["method", "view"])


class EvaluationCollector(Collector):
    """The metrics read at scrape time from the database and Redis."""

    def collect(self) -> Iterator[GaugeMetricFamily | HistogramMetricFamily]:
        yield self.evaluations_by_state()
        yield self.runs_set_aside()
        yield from self.queue_lengths()
        yield self.durations()

    def evaluations_by_state(self) -> GaugeMetricFamily:
        family = GaugeMetricFamily("kb_evaluations", "Evaluations by lifecycle state", labels=["state"])
        counts = dict(Evaluation.objects.order_by().values_list("state").annotate(n=Count("pk")))
        for state in Evaluation.State.values:
            family.add_metric([state], counts.get(state, 0))
        return family

    def runs_set_aside(self) -> GaugeMetricFamily:
        family = GaugeMetricFamily(
            "kb_runs_set_aside",
            "Runs that fail to score, set aside: their board rows are stale (rescoring.set_aside)",
        )
        family.add_metric([], DirtyRun.objects.filter(failed_at__isnull=False).count())
        return family

    def queue_lengths(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily("kb_queue_length", "Jobs waiting in each evaluation queue", labels=["queue"])
        up = GaugeMetricFamily("kb_queue_up", "1 when the evaluation queues could be read from Redis")
        try:
            for name in settings.EVAL_QUEUES:
                family.add_metric([name], eval_queue(name).count)
        except (RedisError, OSError):
            up.add_metric([], 0)
            yield up
            return
        up.add_metric([], 1)
        yield up
        yield family

    def durations(self) -> HistogramMetricFamily:
        finished = (
            Evaluation.objects.filter(state=Evaluation.State.DONE, started_at__isnull=False, finished_at__isnull=False)
            .order_by("-finished_at")
            .values_list("started_at", "finished_at")[:EVAL_DURATION_SAMPLE]
        )
        seconds = [(end - start).total_seconds() for start, end in finished]
        buckets = [(str(bound), sum(1 for s in seconds if s <= bound)) for bound in DURATION_BUCKETS]
        buckets.append(("+Inf", len(seconds)))
        return HistogramMetricFamily(
            "kb_evaluation_duration_seconds",
            f"Run time of the last {EVAL_DURATION_SAMPLE} finished evaluations",
            buckets=buckets,
            sum_value=sum(seconds),
        )


def _registry() -> CollectorRegistry:
    """What a scrape reports. In multi-process mode: a fresh registry summing every worker's
    files, plus the evaluation collector (the process's own REGISTRY would show this worker's
    counts only). Otherwise the process's registry with the evaluation collector in it
    (registered once)."""
    if settings.PROMETHEUS_MULTIPROC_DIR:
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry, path=settings.PROMETHEUS_MULTIPROC_DIR)
        registry.register(EvaluationCollector())
        return registry
    if not getattr(REGISTRY, "_kb_evaluations", False):
        REGISTRY.register(EvaluationCollector())
        REGISTRY._kb_evaluations = True  # type: ignore[attr-defined]
    return REGISTRY


@never_cache
def metrics(request: HttpRequest) -> HttpResponse:
    if not is_operator(request):
        return HttpResponse(
            "/metrics is for operators: scrape it from the private network (PRIVATE_NETWORKS) or send "
            "'Authorization: Bearer <METRICS_TOKEN>'.\n",
            status=403,
            content_type="text/plain; charset=utf-8",
        )
    return HttpResponse(generate_latest(_registry()), content_type=CONTENT_TYPE_LATEST)


class RequestMetricsMiddleware:
    """Counts every request by method, view (the URL pattern's name, so the labels stay few) and
    status, and times it."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        start = time.perf_counter()
        response = self.get_response(request)
        match = getattr(request, "resolver_match", None)
        view = (match.view_name if match else "") or "unmatched"
        REQUESTS.labels(request.method, view, str(response.status_code)).inc()
        REQUEST_SECONDS.labels(request.method, view).observe(time.perf_counter() - start)
        return response
