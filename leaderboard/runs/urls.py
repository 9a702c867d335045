"""Pages of runs (included from config/urls.py)."""

from django.urls import path

from leaderboard.runs import views

urlpatterns = [
    path("runs/<int:pk>/", views.run_detail, name="run-detail"),
]
