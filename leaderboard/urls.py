from django.urls import path

from leaderboard import views

urlpatterns = [
    path("", views.overview, name="overview"),
    path("models/<slug:slug>/", views.model_detail, name="model-detail"),
    path("problems/<int:pk>/", views.problem_detail, name="problem-detail"),
    path("kernels/<int:pk>/", views.kernel_detail, name="kernel-detail"),
]
