"""/api/: the schema, its interactive docs (served from our static files), and /api/v1/, one
module of this package per resource."""

from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView
from rest_framework.routers import DefaultRouter

from leaderboard.api.evaluations import EvaluationViewSet
from leaderboard.api.kernels import KernelViewSet
from leaderboard.api.labs import LabViewSet, LanguageModelViewSet
from leaderboard.api.launch_posts import LaunchPostViewSet
from leaderboard.api.leaderboard import LeaderboardView
from leaderboard.api.problems import HardwareViewSet, ProblemSetViewSet, ProblemViewSet
from leaderboard.api.reported_scores import ReportedScoreViewSet
from leaderboard.api.review_workflow import KernelReportsView, KernelReviewsView, ReviewQueueView
from leaderboard.api.reviews import ReviewViewSet
from leaderboard.api.run_resources import RunCompareView, RunExportView, RunProblemsView, RunProgressView, RunScoresView
from leaderboard.api.runs import RunViewSet
from leaderboard.api.submissions import SubmissionView

router = DefaultRouter()
router.register("problem-sets", ProblemSetViewSet, basename="problemset")
router.register("problems", ProblemViewSet, basename="problem")
router.register("hardware", HardwareViewSet, basename="hardware")
router.register("labs", LabViewSet, basename="lab")
router.register("models", LanguageModelViewSet, basename="languagemodel")
router.register("runs", RunViewSet, basename="run")
router.register("kernels", KernelViewSet, basename="kernel")
router.register("evaluations", EvaluationViewSet, basename="evaluation")
router.register("reported-scores", ReportedScoreViewSet, basename="reportedscore")
router.register("launch-posts", LaunchPostViewSet, basename="launchpost")
router.register("reviews", ReviewViewSet, basename="review")

# Sub-resources of kernels and runs, and the review queue: before the router's routes.
workflow = [
    path("kernels/<int:pk>/reviews/", KernelReviewsView.as_view(), name="kernel-reviews"),
    path("kernels/<int:pk>/reports/", KernelReportsView.as_view(), name="kernel-reports"),
    path("review-queue/", ReviewQueueView.as_view(), name="review-queue"),
    path("runs/<int:pk>/problems/", RunProblemsView.as_view(), name="run-problems"),
    path("runs/<int:pk>/progress/", RunProgressView.as_view(), name="run-progress"),
    path("runs/<int:pk>/scores/", RunScoresView.as_view(), name="run-scores"),
    path("runs/<int:pk>/compare/<int:other>/", RunCompareView.as_view(), name="run-compare"),
    path("runs/<int:pk>/export/", RunExportView.as_view(), name="run-export"),
]

v1 = [
    path("submissions/", SubmissionView.as_view(), name="submission"),
    path("leaderboard/", LeaderboardView.as_view(), name="leaderboard"),
    *workflow,
    path("", include(router.urls)),
]

app_name = "api"
urlpatterns = [
    path("schema/", SpectacularAPIView.as_view(), name="schema"),
    path("docs/", SpectacularSwaggerView.as_view(url_name="api:schema"), name="docs"),
    path("v1/", include(v1)),
]
