"""/healthz and /metrics (included from config/urls.py)."""

from django.urls import path

from leaderboard.ops.health import healthz
from leaderboard.ops.metrics import metrics

urlpatterns = [
    path("healthz", healthz, name="healthz"),
    path("metrics", metrics, name="metrics"),
]
