"""The reviewer workflow in the REST API (under /api/v1/, routed in leaderboard/api/urls.py):

- GET  /api/v1/kernels/<id>/reviews/  a kernel's review state and full audit trail (public);
- POST /api/v1/kernels/<id>/reviews/  record a verdict (needs leaderboard.add_review);
- POST /api/v1/kernels/<id>/reports/  report a kernel (any signed-in user);
- GET  /api/v1/review-queue/          the review queue, with the page's filters (reviewers only).

`post_verdict` is the API's one way to record a verdict: the view here and the main API's
POST /api/v1/reviews/ (leaderboard/api/reviews.py) both call it. Every write goes through
leaderboard.reviews.services, like the pages. Writes are throttled by the API's default throttle
(leaderboard.api.throttling.WriteRateThrottle, named in settings.REST_FRAMEWORK).
"""

from __future__ import annotations

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.pagination import PageNumberPagination
from rest_framework.permissions import SAFE_METHODS, BasePermission, IsAuthenticated
from rest_framework.response import Response
from rest_framework.views import APIView

from leaderboard.api.base import PlainText
from leaderboard.api.common import query_choice
from leaderboard.models import Kernel, KernelReport, Review
from leaderboard.reviews import services as reviews
from problems.models import LEVELS


class ReadsOrReviewer(BasePermission):
    """Reads for everyone; writes for users holding leaderboard.add_review."""

    def has_permission(self, request, view) -> bool:
        return request.method in SAFE_METHODS or reviews.can_review(request.user)


class ReviewerOnly(BasePermission):
    def has_permission(self, request, view) -> bool:
        return reviews.can_review(request.user)


class TrailSerializer(serializers.ModelSerializer):
    reviewer = serializers.CharField(source="reviewer.get_username", read_only=True)
    verdict_display = serializers.CharField(source="get_verdict_display", read_only=True)

    class Meta:
        model = Review
        fields = ["id", "kernel", "verdict", "verdict_display", "note", "reviewer", "created_at"]


# A verdict as a POST carries it; the body names the kernel only where the URL does not. (A
# comment, not a docstring, which the schema would show.)
class VerdictInSerializer(serializers.Serializer):
    kernel = serializers.PrimaryKeyRelatedField(queryset=Kernel.objects.all())
    verdict = serializers.ChoiceField(choices=Review.Verdict.choices)
    note = PlainText(multiline=True, required=False, allow_blank=True, max_length=reviews.NOTE_MAX_LENGTH, default="")

    def __init__(self, *args, kernel_in_body: bool = False, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        if not kernel_in_body:
            self.fields.pop("kernel")


class ReportInSerializer(serializers.Serializer):
    reason = PlainText(multiline=True, max_length=KernelReport.REASON_MAX_LENGTH)


class ReviewStateSerializer(serializers.Serializer):
    """Documents GET /api/v1/kernels/<id>/reviews/ (the view builds the dict itself)."""

    kernel = serializers.IntegerField()
    latest_verdict = serializers.CharField(allow_null=True, help_text="clean, reward_hack, invalid or rerun.")
    excluded = serializers.BooleanField()
    exclusion = inline_serializer(
        "Exclusion",
        {
            "verdict": serializers.CharField(),
            "note": serializers.CharField(),
            "reviewer": serializers.CharField(),
            "created_at": serializers.DateTimeField(),
        },
        allow_null=True,
    )
    needs_review = serializers.BooleanField()
    flags = serializers.ListField(child=serializers.DictField())
    review_notes = serializers.ListField(child=serializers.DictField())
    open_reports = serializers.IntegerField()
    reviews = TrailSerializer(many=True)


class RecordedVerdictSerializer(TrailSerializer):
    queued_evaluation = serializers.IntegerField(allow_null=True, read_only=True)

    class Meta(TrailSerializer.Meta):
        fields = [*TrailSerializer.Meta.fields, "queued_evaluation"]


ReportOutSerializer = inline_serializer(
    "KernelReportReply",
    {
        "id": serializers.IntegerField(),
        "kernel": serializers.IntegerField(),
        "created": serializers.BooleanField(),
        "created_at": serializers.DateTimeField(),
    },
)
QueueRowSerializer = inline_serializer(
    "ReviewQueueRow",
    {
        "kernel": serializers.IntegerField(),
        "problem": serializers.IntegerField(),
        "level": serializers.IntegerField(),
        "problem_name": serializers.CharField(),
        "model": serializers.CharField(),
        "run": serializers.IntegerField(),
        "speedup": serializers.FloatField(allow_null=True),
        "origin": serializers.CharField(),
        "flags": serializers.ListField(child=serializers.CharField()),
        "flagged": serializers.BooleanField(),
        "reported": serializers.BooleanField(),
        "high_imported": serializers.BooleanField(),
        "high_published": serializers.BooleanField(),
        "published_speedup": serializers.FloatField(allow_null=True),
        "published_label": serializers.CharField(),
        "latest_verdict": serializers.CharField(allow_null=True),
        "evaluated_at": serializers.DateTimeField(allow_null=True),
        "latest_report_at": serializers.DateTimeField(allow_null=True),
        "instruments": serializers.DictField(
            child=serializers.FloatField(allow_null=True),
            help_text="The figures the queue sorts by (sol: the kernel's fraction of the speed of light; precision: "
            "its error against fp64 over the fp32 reference's; margin: the largest share of the tolerance used; "
            "busy: the GPU-busy share of its profiled forward); null where not measured.",
        ),
    },
    many=True,
)


def review_state_data(kernel: Kernel) -> dict:
    state = reviews.kernel_review_state(kernel)
    needs_review = Kernel.objects.needing_review().filter(pk=kernel.pk).exists()
    exclusion = state.exclusion
    return {
        "kernel": kernel.pk,
        "latest_verdict": state.latest.verdict if state.latest else None,
        "excluded": state.excluded,
        "exclusion": None
        if exclusion is None
        else {
            "verdict": exclusion.verdict,
            "note": exclusion.note,
            "reviewer": exclusion.reviewer.get_username(),
            "created_at": exclusion.created_at,
        },
        "needs_review": needs_review,
        "flags": state.flags,
        "review_notes": state.review_notes,
        "open_reports": len(state.open_reports),
        "reviews": TrailSerializer(state.reviews, many=True).data,
    }


def post_verdict(request, kernel: Kernel | None = None) -> reviews.VerdictResult:
    """Record the verdict a request carries, on `kernel` (from the URL) or on the kernel the body
    names: the API's one implementation behind POST /api/v1/kernels/<id>/reviews/ and
    POST /api/v1/reviews/. Invalid input raises ValidationError (400)."""
    data = VerdictInSerializer(data=request.data, kernel_in_body=kernel is None)
    data.is_valid(raise_exception=True)
    verdict = data.validated_data
    return reviews.record_verdict(kernel or verdict["kernel"], verdict["verdict"], verdict["note"], by=request.user)


class KernelReviewsView(APIView):
    permission_classes = [ReadsOrReviewer]

    @extend_schema(
        summary="A kernel's review state and audit trail (every verdict, newest first)",
        responses={200: ReviewStateSerializer},
    )
    def get(self, request, pk: int):
        kernel = get_object_or_404(Kernel.objects.select_related("latest_evaluation"), pk=pk)
        return Response(review_state_data(kernel))

    @extend_schema(
        summary="Record a verdict on a kernel",
        description="clean, reward_hack, invalid or rerun. reward_hack and invalid take the kernel out of "
        "fast_p and rankings; rerun queues a fresh evaluation (its id is returned). Needs leaderboard.add_review.",
        request=VerdictInSerializer,
        responses={201: RecordedVerdictSerializer},
    )
    def post(self, request, pk: int):
        kernel = get_object_or_404(Kernel.objects.select_related("run__hardware", "latest_evaluation__hardware"), pk=pk)
        result = post_verdict(request, kernel)
        body = TrailSerializer(result.review).data
        body["queued_evaluation"] = result.evaluation.pk if result.evaluation else None
        return Response(body, status=status.HTTP_201_CREATED)


class KernelReportsView(APIView):
    permission_classes = [IsAuthenticated]

    @extend_schema(
        summary="Report a kernel for review",
        request=ReportInSerializer,
        responses={201: ReportOutSerializer, 200: ReportOutSerializer},
    )
    def post(self, request, pk: int):
        kernel = get_object_or_404(Kernel, pk=pk)
        data = ReportInSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        result = reviews.report_kernel(kernel, data.validated_data["reason"], by=request.user)
        body = {
            "id": result.report.pk,
            "kernel": kernel.pk,
            "created": result.created,
            "created_at": result.report.created_at,
        }
        return Response(body, status=status.HTTP_201_CREATED if result.created else status.HTTP_200_OK)


class ReviewQueueView(APIView):
    permission_classes = [ReviewerOnly]

    @extend_schema(
        summary="Kernels that need a look (reviewers only)",
        parameters=[
            OpenApiParameter("flag", str, description="A flag or note code."),
            OpenApiParameter("level", int),
            OpenApiParameter("model", str, description="Model slug."),
            OpenApiParameter("reason", str, enum=list(reviews.QUEUE_REASONS)),
            OpenApiParameter("sort", str, enum=list(reviews.QUEUE_SORTS)),
        ],
        responses={200: QueueRowSerializer},
    )
    def get(self, request):
        level = query_choice(request, "level", [(str(n), n) for n in LEVELS])
        filters = reviews.QueueFilters(
            flag=query_choice(request, "flag", reviews.flag_choices()),
            level=int(level) if level else None,
            model=request.query_params.get("model") or None,
            reason=query_choice(request, "reason", reviews.QUEUE_REASONS.items()),
            sort=query_choice(request, "sort", reviews.QUEUE_SORTS.items()) or "date",
        )
        paginator = PageNumberPagination()
        page = paginator.paginate_queryset(reviews.review_queue(filters), request, view=self)
        rows = [
            {
                "kernel": kernel.pk,
                "problem": kernel.problem_id,
                "level": kernel.problem.level,
                "problem_name": kernel.problem.name,
                "model": kernel.run.model.slug,
                "run": kernel.run_id,
                "speedup": kernel.latest_evaluation.speedup if kernel.latest_evaluation else None,
                "origin": kernel.latest_evaluation.origin if kernel.latest_evaluation else kernel.run.origin,
                "flags": kernel.latest_evaluation.flag_codes if kernel.latest_evaluation else [],
                "flagged": kernel.is_flagged,
                "reported": kernel.is_reported,
                "high_imported": kernel.is_high_imported,
                "high_published": kernel.is_high_published,
                "published_speedup": kernel.published_speedup,
                "published_label": kernel.published_label,
                "latest_verdict": kernel.latest_verdict,
                "evaluated_at": kernel.evaluated_at,
                "latest_report_at": kernel.latest_report_at,
                "instruments": reviews.queue_figures(kernel),
            }
            for kernel in page
        ]
        return paginator.get_paginated_response(rows)
