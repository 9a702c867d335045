"""Pages of the reviewer workflow (included from config/urls.py)."""

from django.urls import path

from leaderboard.reviews import views as review_views

urlpatterns = [
    path("review/", review_views.queue_page, name="review-queue"),
    path("kernels/<int:pk>/review/", review_views.review_kernel, name="kernel-review"),
    path("kernels/<int:pk>/report/", review_views.post_report, name="kernel-report"),
    path("sign-in/", review_views.SignInView.as_view(), name="review-sign-in"),
    path("sign-out/", review_views.SignOutView.as_view(), name="review-sign-out"),
]
