"""/api/v1/launch-posts/: labs' model launch posts, read; POST ingests rows."""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, serializers

from leaderboard.api.base import ReadOnly, query_param
from leaderboard.api.common import query_bool, query_text
from leaderboard.api.imports import TABLE_RESPONSES, CsvUploadSerializer, TableIngestMixin
from leaderboard.api.permissions import CanAddLaunchPost
from leaderboard.ingest import launch_posts
from leaderboard.ingest.reported_scores import RowErrors
from leaderboard.models import LaunchPost


class LaunchPostSerializer(serializers.ModelSerializer):
    lab = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    lab_name = serializers.CharField(source="lab.name", read_only=True)
    model = serializers.SlugRelatedField(slug_field="slug", read_only=True)

    class Meta:
        model = LaunchPost
        fields = [
            "id",
            "lab",
            "lab_name",
            "model",
            "title",
            "url",
            "published_on",
            "lists_kernelbench",
            "kernelbench_score",
            "created_at",
        ]


# Documents the request in the schema; leaderboard.ingest.launch_posts validates it.
class LaunchPostRowSerializer(serializers.Serializer):
    date = serializers.DateField()
    lab = serializers.CharField()
    model = serializers.CharField(required=False, allow_blank=True)
    title = serializers.CharField()
    url = serializers.URLField()
    lists_kernelbench = serializers.BooleanField(required=False)
    kernelbench_score = serializers.CharField(required=False, allow_blank=True)


@extend_schema(
    parameters=[
        query_param("lab", description="Lab slug."),
        query_param("model", description="Model slug."),
        query_param("lists_kernelbench", bool, "Only posts that list KernelBench (true) or not (false)."),
    ]
)
@extend_schema(
    methods=["POST"],
    summary="Ingest launch posts",
    description=(
        "Rows with the columns date, lab, model, title, url, lists_kernelbench, kernelbench_score, as JSON (one "
        "object or a list), a CSV body (text/csv) or a CSV `file` (multipart). A post is known by its url. "
        "All or nothing."
    ),
    request={
        "application/json": LaunchPostRowSerializer(many=True),
        "text/csv": OpenApiTypes.STR,
        "multipart/form-data": CsvUploadSerializer,
    },
    responses=TABLE_RESPONSES,
)
class LaunchPostViewSet(TableIngestMixin, mixins.CreateModelMixin, ReadOnly):
    """Labs' model launch posts, and whether they list KernelBench."""

    serializer_class = LaunchPostSerializer
    permission_classes = [CanAddLaunchPost]
    noun = "launch posts"

    def get_queryset(self):
        posts = LaunchPost.objects.select_related("lab", "model").order_by("-published_on", "pk")
        if slug := query_text(self.request, "lab"):
            posts = posts.filter(lab__slug=slug)
        if slug := query_text(self.request, "model"):
            posts = posts.filter(model__slug=slug)
        if (lists := query_bool(self.request, "lists_kernelbench")) is not None:
            posts = posts.filter(lists_kernelbench=lists)
        return posts

    def parse_json(self, data):
        if isinstance(data, dict):
            data = [data]
        if not isinstance(data, list) or not data:
            raise RowErrors(
                [
                    "expected an object or a non-empty list of objects with the columns "
                    + ", ".join(launch_posts.COLUMNS)
                ]
            )
        return launch_posts.parse_rows(list(enumerate(data, start=1)), label="row")

    def parse_csv(self, text, name):
        return launch_posts.read_csv(text, name)

    def store(self, rows, user):
        return launch_posts.store_rows(rows, by=user)
