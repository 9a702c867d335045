from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    path("django-rq/", include("config.rq_dashboard")),  # needs leaderboard.manage_queues, not is_staff
    path("api/", include("leaderboard.api.urls")),
    path("", include("leaderboard.reviews.urls")),  # the reviewer workflow
    path("", include("leaderboard.runs.urls")),  # /runs/<id>/
    path("", include("leaderboard.ops.urls")),  # /healthz, /metrics
    path("", include("leaderboard.urls")),
]

# A database outage answers 503 with Retry-After (leaderboard/ops/outage.py); anything else, the 500 page.
handler500 = "leaderboard.ops.outage.server_error"
# A download's or the API's 404 is JSON or CSV, never an HTML page (leaderboard/reads/error_bodies.py).
handler404 = "leaderboard.reads.error_bodies.page_not_found"
