"""/api/v1/problem-sets/, /api/v1/problems/ and /api/v1/hardware/: the problems app, read only."""

from __future__ import annotations

from django.db.models import Count
from django.http import Http404
from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import serializers

from leaderboard.api.base import IdentityUrl, ReadOnly, query_param
from leaderboard.api.common import query_int, query_text
from problems.models import Hardware, Problem, ProblemSet, ScoringRules


class ScoringRulesSerializer(serializers.ModelSerializer):
    """KernelBench's rules as one version defined them (tolerance used as atol and rtol)."""

    tolerance = serializers.SerializerMethodField()

    class Meta:
        model = ScoringRules
        fields = ["slug", "name", "kernelbench_version", "tolerance", "correctness_trials", "timing_method"]

    @extend_schema_field({"type": "object", "additionalProperties": {"type": "number"}})
    def get_tolerance(self, obj: ScoringRules) -> dict[str, float]:
        return {"fp32": obj.fp32_tolerance, "fp16": obj.fp16_tolerance, "bf16": obj.bf16_tolerance}


class ProblemSetSerializer(serializers.ModelSerializer):
    problem_count = serializers.IntegerField(read_only=True)
    rules = ScoringRulesSerializer(read_only=True)

    class Meta:
        model = ProblemSet
        fields = ["slug", "name", "version", "description", "source_url", "rules", "problem_count", "created_at"]


class ProblemSetDetailSerializer(ProblemSetSerializer):
    problems_per_level = serializers.SerializerMethodField()

    class Meta(ProblemSetSerializer.Meta):
        fields = [*ProblemSetSerializer.Meta.fields, "problems_per_level"]

    @extend_schema_field({"type": "object", "additionalProperties": {"type": "integer"}})
    def get_problems_per_level(self, obj: ProblemSet) -> dict[str, int]:
        return {str(level): n for level, n in obj.problem_counts().items()}


class ProblemSerializer(serializers.ModelSerializer):
    problem_set = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    tags = serializers.ListField(child=serializers.CharField(), source="tag_list", read_only=True)
    url = IdentityUrl(view_name="api:problem-detail")

    class Meta:
        model = Problem
        fields = ["id", "url", "problem_set", "level", "number", "name", "tags", "source_hash", "updated_at"]


class ProblemDetailSerializer(ProblemSerializer):
    class Meta(ProblemSerializer.Meta):
        fields = [*ProblemSerializer.Meta.fields, "source"]


class HardwareSerializer(serializers.ModelSerializer):
    queue_name = serializers.CharField(read_only=True)

    class Meta:
        model = Hardware
        fields = [
            "slug",
            "name",
            "kind",
            "device_name",
            "driver_version",
            "cuda_version",
            "torch_version",
            "python_version",
            "last_seen_at",
            "queue_name",
        ]


class NamedDetail(ReadOnly):
    # A detail route /<slug or name>/: the row the text names, as every command and filter reads it
    # (problems.models.named_by: slug or name, case-insensitively); 404 when none.

    lookup_field = "slug"
    lookup_value_regex = r"[^/]+"

    def get_object(self):
        row = self.get_queryset().resolve(self.kwargs[self.lookup_field])
        if row is None:
            raise Http404(f"no {self.get_queryset().model._meta.verbose_name} {self.kwargs[self.lookup_field]!r}")
        self.check_object_permissions(self.request, row)
        return row


class ProblemSetViewSet(NamedDetail):
    """Problem sets (versions of KernelBench); fast_p is always computed against one set."""

    queryset = ProblemSet.objects.select_related("rules").annotate(problem_count=Count("problems")).order_by("name")
    serializer_class = ProblemSetSerializer
    detail_serializer_class = ProblemSetDetailSerializer


@extend_schema(
    parameters=[
        query_param("set", description="Problem set slug or name (case-insensitive)."),
        query_param("problem_set", description="The same as set= (the name of the field in each row)."),
        query_param("level", int, "Level, 1-4."),
        query_param("number", int, "The problem's number in its level (with level= and set=: one problem)."),
        query_param("tag", description="One tag, e.g. matmul."),
        query_param("search", description="Text in the name or tags."),
    ]
)
class ProblemViewSet(ReadOnly):
    """Problems; the detail includes the reference source."""

    serializer_class = ProblemSerializer
    detail_serializer_class = ProblemDetailSerializer

    def get_queryset(self):
        problems = Problem.objects.select_related("problem_set").order_by("problem_set__name", "level", "number")
        if self.action != "list":
            return problems
        if name := query_text(self.request, "set") or query_text(self.request, "problem_set"):
            problems = problems.filter(problem_set=ProblemSet.objects.resolve(name))
        if (level := query_int(self.request, "level", low=1, high=4)) is not None:
            problems = problems.filter(level=level)
        if (number := query_int(self.request, "number", low=1)) is not None:
            problems = problems.filter(number=number)
        if tag := query_text(self.request, "tag"):
            problems = problems.filter(tags__icontains=tag.lower())
        if text := query_text(self.request, "search"):
            problems = problems.search(text)
        return problems.defer("source")


class HardwareViewSet(NamedDetail):
    """Hardware classes that evaluations run on, and what workers report about them."""

    queryset = Hardware.objects.order_by("slug")
    serializer_class = HardwareSerializer
