from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    path("django-rq/", include("django_rq.urls")),
    path("api/", include("leaderboard.api.urls")),
    path("", include("leaderboard.api.urls_pages")),
    path("", include("leaderboard.urls")),
]
