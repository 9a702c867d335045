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
from leaderboard.api.reviews import ReviewViewSet
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

v1 = [
    path("submissions/", SubmissionView.as_view(), name="submission"),
    path("leaderboard/", LeaderboardView.as_view(), name="leaderboard"),
    path("", include(router.urls)),
]

app_name = "api"
urlpatterns = [
    path("schema/", SpectacularAPIView.as_view(), name="schema"),
    path("docs/", SpectacularSwaggerView.as_view(url_name="api:schema"), name="docs"),
    path("v1/", include(v1)),
]
