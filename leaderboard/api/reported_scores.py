"""/api/v1/reported-scores/: scores that labs and papers published, read; POST ingests rows."""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, serializers

from leaderboard.api.base import ReadOnly, query_param
from leaderboard.api.common import query_text
from leaderboard.api.imports import TABLE_RESPONSES, CsvUploadSerializer, TableIngestMixin
from leaderboard.api.permissions import CanAddReportedScore
from leaderboard.ingest import reported_scores
from leaderboard.models import ReportedScore


class ReportedScoreSerializer(serializers.ModelSerializer):
    model = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    model_name = serializers.CharField(source="model.name", read_only=True)
    lab = serializers.CharField(source="model.lab.name", read_only=True, default=None)

    class Meta:
        model = ReportedScore
        fields = [
            "id",
            "model",
            "model_name",
            "lab",
            "variant",
            "metric",
            "value",
            "unit",
            "display_value",
            "setting",
            "hardware_name",
            "reported_on",
            "date_precision",
            "display_date",
            "source_url",
            "caveat",
            "created_at",
        ]


class ReportedScoreRowSerializer(serializers.Serializer):
    """One row, with the columns of data/reported_scores.csv."""

    # Documents the request in the schema; leaderboard.ingest.reported_scores validates it.
    model = serializers.CharField()
    organization = serializers.CharField(required=False, allow_blank=True)
    variant = serializers.CharField()
    metric = serializers.CharField()
    value = serializers.FloatField()
    unit = serializers.ChoiceField(choices=["%", "x"])
    setting = serializers.CharField(required=False, allow_blank=True)
    hardware = serializers.CharField(required=False, allow_blank=True)
    date = serializers.CharField(help_text="YYYY-MM-DD, or YYYY-MM for a month.")
    source_url = serializers.URLField()


@extend_schema(
    parameters=[
        query_param("model", description="Model slug."),
        query_param("lab", description="Lab slug."),
        query_param("metric", description="Metric, exactly (e.g. fast_1)."),
        query_param("variant", description="Text in the variant."),
    ]
)
@extend_schema(
    methods=["POST"],
    summary="Ingest reported scores",
    description=(
        "Rows with the columns of data/reported_scores.csv: model, organization, variant, metric, value, unit, "
        "setting, hardware, date, source_url. JSON (one object or a list), a CSV body (text/csv), or a CSV "
        "`file` (multipart). Models and labs are matched case-insensitively or created; `%` values lie in "
        "0-100, `x` values are positive; dates are not in the future; URLs are http(s). All or nothing."
    ),
    request={
        "application/json": ReportedScoreRowSerializer(many=True),
        "text/csv": OpenApiTypes.STR,
        "multipart/form-data": CsvUploadSerializer,
    },
    responses=TABLE_RESPONSES,
)
class ReportedScoreViewSet(TableIngestMixin, mixins.CreateModelMixin, ReadOnly):
    """Scores that labs and papers published, always shown apart from scores measured here."""

    serializer_class = ReportedScoreSerializer
    permission_classes = [CanAddReportedScore]
    noun = "reported scores"

    def get_queryset(self):
        scores = ReportedScore.objects.select_related("model__lab").order_by("-reported_on", "model__name", "pk")
        if slug := query_text(self.request, "model"):
            scores = scores.filter(model__slug=slug)
        if slug := query_text(self.request, "lab"):
            scores = scores.filter(model__lab__slug=slug)
        if metric := query_text(self.request, "metric"):
            scores = scores.filter(metric=metric)
        if variant := query_text(self.request, "variant"):
            scores = scores.filter(variant__icontains=variant)
        return scores

    def parse_json(self, data):
        return reported_scores.parse_json_rows(data)

    def parse_csv(self, text, name):
        return reported_scores.read_csv(text, name)

    def store(self, rows, user):
        return reported_scores.store_rows(rows, by=user)
