"""/api/v1/kernels/: generated solutions, read only; the detail carries the source and every
evaluation of the kernel."""

from __future__ import annotations

from django.db.models import Prefetch
from drf_spectacular.utils import extend_schema, extend_schema_field, inline_serializer
from rest_framework import serializers

from leaderboard.api.base import IdentityUrl, ReadOnly, query_param
from leaderboard.api.common import query_choice, query_int, query_text
from leaderboard.api.evaluations import EvaluationBriefSerializer
from leaderboard.api.pagination import CachedCountPagination
from leaderboard.models import Evaluation, Kernel
from problems.models import ProblemSet


class KernelSerializer(serializers.ModelSerializer):
    url = IdentityUrl(view_name="api:kernel-detail")
    level = serializers.IntegerField(source="problem.level", read_only=True)
    problem_number = serializers.IntegerField(source="problem.number", read_only=True)
    problem_name = serializers.CharField(source="problem.name", read_only=True)
    model = serializers.SlugRelatedField(source="run.model", slug_field="slug", read_only=True)
    latest_evaluation = EvaluationBriefSerializer(read_only=True)
    published = serializers.SerializerMethodField(
        help_text="A figure someone else published for this kernel (e.g. KernelBench's leaderboard, L40S), apart "
        "from the evaluations here and never counted in scores; null when none."
    )

    class Meta:
        model = Kernel
        fields = [
            "id",
            "url",
            "run",
            "problem",
            "level",
            "problem_number",
            "problem_name",
            "model",
            "sample_index",
            "backend",
            "source_hash",
            "latest_evaluation",
            "published",
            "created_at",
        ]

    @extend_schema_field(
        inline_serializer("PublishedFigure", {"speedup": serializers.FloatField(), "label": serializers.CharField()})
    )
    def get_published(self, kernel: Kernel) -> dict | None:
        if kernel.published_speedup is None:
            return None
        return {"speedup": kernel.published_speedup, "label": kernel.published_label}


class KernelDetailSerializer(KernelSerializer):
    evaluations = EvaluationBriefSerializer(
        many=True,
        read_only=True,
        help_text="Every evaluation, newest first: imported (unverified) and measured here side by side.",
    )

    class Meta(KernelSerializer.Meta):
        fields = [*KernelSerializer.Meta.fields, "evaluations", "source"]


@extend_schema(
    parameters=[
        query_param("run", int, "Run id."),
        query_param("problem", int, "Problem id."),
        query_param("model", description="Model slug."),
        query_param("set", description="Problem set slug or name (case-insensitive)."),
        query_param("level", int, "Level, 1-4."),
        query_param(
            "backend", description="cuda, triton, cpp, torch, other.", enum=[v for v, _ in Kernel.Backend.choices]
        ),
    ]
)
class KernelViewSet(ReadOnly):
    """Kernels (generated solutions); the detail includes the source."""

    serializer_class = KernelSerializer
    detail_serializer_class = KernelDetailSerializer
    pagination_class = CachedCountPagination  # a million rows: the total is cached, not counted per page

    def get_queryset(self):
        kernels = Kernel.objects.select_related("problem", "run__model", "latest_evaluation").order_by("-pk")
        if self.action != "list":
            history = Evaluation.objects.order_by("-queued_at", "-pk")
            return kernels.prefetch_related(Prefetch("evaluations", queryset=history))
        if (run := query_int(self.request, "run", low=1)) is not None:
            kernels = kernels.filter(run_id=run)
        if (problem := query_int(self.request, "problem", low=1)) is not None:
            kernels = kernels.filter(problem_id=problem)
        if slug := query_text(self.request, "model"):
            kernels = kernels.filter(run__model__slug=slug)
        if name := query_text(self.request, "set"):
            kernels = kernels.filter(problem__problem_set=ProblemSet.objects.resolve(name))
        if (level := query_int(self.request, "level", low=1, high=4)) is not None:
            kernels = kernels.filter(problem__level=level)
        if backend := query_choice(self.request, "backend", Kernel.Backend.choices):
            kernels = kernels.filter(backend=backend)
        return kernels.defer("source")
