"""Pages (not API) that the API package serves: the kernel submission form."""

from django.urls import path

from leaderboard.api.page_views import submit_kernel

urlpatterns = [
    path("problems/<int:pk>/submit/", submit_kernel, name="problem-submit"),
]
