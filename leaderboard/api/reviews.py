"""/api/v1/reviews/: reviewers' verdicts on kernels, an audit trail (the latest counts). POST
records a verdict through leaderboard.api.review_workflow.post_verdict, like
POST /api/v1/kernels/<id>/reviews/."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import mixins, serializers, status
from rest_framework.response import Response

from leaderboard.api.base import ReadOnly, query_param
from leaderboard.api.common import query_choice, query_int
from leaderboard.api.review_workflow import ReadsOrReviewer, post_verdict
from leaderboard.models import Kernel, Review
from leaderboard.reviews.services import NOTE_MAX_LENGTH


class ReviewSerializer(serializers.ModelSerializer):
    reviewer = serializers.CharField(source="reviewer.username", read_only=True)
    kernel = serializers.PrimaryKeyRelatedField(queryset=Kernel.objects.all())
    note = serializers.CharField(required=False, allow_blank=True, max_length=NOTE_MAX_LENGTH, default="")

    class Meta:
        model = Review
        fields = ["id", "kernel", "verdict", "note", "reviewer", "created_at"]
        read_only_fields = ["id", "reviewer", "created_at"]


@extend_schema(
    parameters=[
        query_param("kernel", int, "Kernel id."),
        query_param("verdict", enum=[v for v, _ in Review.Verdict.choices]),
    ]
)
class ReviewViewSet(mixins.CreateModelMixin, ReadOnly):
    """Reviewers' verdicts on kernels (an audit trail; the latest counts)."""

    serializer_class = ReviewSerializer  # reads, and the schema of a POST's body and reply
    permission_classes = [ReadsOrReviewer]  # as POST /api/v1/kernels/<id>/reviews/

    def get_queryset(self):
        reviews = Review.objects.select_related("reviewer").order_by("-created_at", "-pk")
        if self.action != "list":
            return reviews
        if (kernel := query_int(self.request, "kernel", low=1)) is not None:
            reviews = reviews.filter(kernel_id=kernel)
        if verdict := query_choice(self.request, "verdict", Review.Verdict.choices):
            reviews = reviews.filter(verdict=verdict)
        return reviews

    def create(self, request, *args, **kwargs):
        # The reviewer workflow's one way to record a verdict ("needs rerun" also queues an evaluation).
        result = post_verdict(request)
        return Response(self.get_serializer(result.review).data, status=status.HTTP_201_CREATED)
