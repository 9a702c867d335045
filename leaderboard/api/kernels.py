"""/api/v1/kernels/: generated solutions, read only; the detail carries the source and every
evaluation of the kernel."""

from __future__ import annotations

from collections.abc import Callable

from django.db.models import Prefetch
from drf_spectacular.utils import extend_schema, extend_schema_field, inline_serializer
from rest_framework import serializers
from rest_framework.request import Request

from leaderboard.api.base import IdentityUrl, ReadOnly, datetime_texts, query_param, row_urls
from leaderboard.api.common import query_choice, query_int, query_text
from leaderboard.api.evaluations import EvaluationBriefSerializer
from leaderboard.api.pagination import CachedCountPagination
from leaderboard.models import Evaluation, Kernel
from leaderboard.models.kernels import published_label
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


# The list's rows, read as values() (base.ReadOnly.list): KernelSerializer's fields.
BRIEF_FIELDS = EvaluationBriefSerializer.Meta.fields
LIST_VALUES = ("id", "run", "problem", "problem__level", "problem__number", "problem__name", "run__model__slug",
               "sample_index", "backend", "source_hash", *(f"latest_evaluation__{name}" for name in BRIEF_FIELDS),
               "published_speedup", "published_hardware", "created_at")  # fmt: skip


def kernel_rows(request: Request, format: str | None) -> Callable[[dict], dict]:
    """Writes a values() row of LIST_VALUES as KernelSerializer writes the kernel
    (tests/api/test_list_rows.py holds the two equal)."""
    url = row_urls(request, "api:kernel-detail", format)
    when = datetime_texts()

    def write(row: dict) -> dict:
        latest = None
        if row["latest_evaluation__id"] is not None:
            latest = {name: row[f"latest_evaluation__{name}"] for name in BRIEF_FIELDS}
            latest["finished_at"] = when(latest["finished_at"])
        published = None
        if (speedup := row["published_speedup"]) is not None:
            published = {"speedup": speedup, "label": published_label(row["published_hardware"])}
        return {
            "id": row["id"], "url": url(row["id"]), "run": row["run"], "problem": row["problem"],
            "level": row["problem__level"], "problem_number": row["problem__number"],
            "problem_name": row["problem__name"], "model": row["run__model__slug"],
            "sample_index": row["sample_index"], "backend": row["backend"], "source_hash": row["source_hash"],
            "latest_evaluation": latest, "published": published, "created_at": when(row["created_at"]),
        }  # fmt: skip

    return write


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
    list_values = LIST_VALUES

    def row_writer(self) -> Callable[[dict], dict]:
        return kernel_rows(self.request, self.format_kwarg)

    def get_queryset(self):
        kernels = Kernel.objects.order_by("-pk")
        if self.action != "list":
            history = Evaluation.objects.order_by("-queued_at", "-pk")
            related = kernels.select_related("problem", "run__model", "latest_evaluation")
            return related.prefetch_related(Prefetch("evaluations", queryset=history))
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
        # No select_related or defer: the list reads only LIST_VALUES (list_values), and its count's
        # cache key (CachedCountPaginator) compiles this query, about 1.5 ms more with them.
        return kernels
