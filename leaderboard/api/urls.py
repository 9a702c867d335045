"""/api/: the schema, its interactive docs (served from our static files), and /api/v1/."""

from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView
from rest_framework.routers import DefaultRouter

from leaderboard.api import views

router = DefaultRouter()
router.register("problem-sets", views.ProblemSetViewSet, basename="problemset")
router.register("problems", views.ProblemViewSet, basename="problem")
router.register("hardware", views.HardwareViewSet, basename="hardware")
router.register("labs", views.LabViewSet, basename="lab")
router.register("models", views.LanguageModelViewSet, basename="languagemodel")
router.register("runs", views.RunViewSet, basename="run")
router.register("kernels", views.KernelViewSet, basename="kernel")
router.register("evaluations", views.EvaluationViewSet, basename="evaluation")
router.register("reported-scores", views.ReportedScoreViewSet, basename="reportedscore")
router.register("launch-posts", views.LaunchPostViewSet, basename="launchpost")
router.register("reviews", views.ReviewViewSet, basename="review")

v1 = [
    path("submissions/", views.SubmissionView.as_view(), name="submission"),
    path("leaderboard/", views.LeaderboardView.as_view(), name="leaderboard"),
    path("", include(router.urls)),
]

app_name = "api"
urlpatterns = [
    path("schema/", SpectacularAPIView.as_view(), name="schema"),
    path("docs/", SpectacularSwaggerView.as_view(url_name="api:schema"), name="docs"),
    path("v1/", include(v1)),
]
