"""/api/v1/labs/ and /api/v1/models/: labs and the language models they make, read only."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers

from leaderboard.api.base import ReadOnly, query_param
from leaderboard.api.common import query_text
from leaderboard.models import Lab, LanguageModel


class LabSerializer(serializers.ModelSerializer):
    class Meta:
        model = Lab
        fields = ["slug", "name", "website"]


class LanguageModelSerializer(serializers.ModelSerializer):
    lab = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    lab_name = serializers.CharField(source="lab.name", read_only=True, default=None)

    class Meta:
        model = LanguageModel
        fields = ["slug", "name", "lab", "lab_name", "release_date", "open_weights", "url", "added_at"]


class LabViewSet(ReadOnly):
    """Labs that make language models."""

    queryset = Lab.objects.order_by("name")
    serializer_class = LabSerializer
    lookup_field = "slug"
    lookup_value_regex = r"[-\w]+"


@extend_schema(
    parameters=[query_param("lab", description="Lab slug."), query_param("search", description="Text in the name.")]
)
class LanguageModelViewSet(ReadOnly):
    """Language models that write kernels."""

    serializer_class = LanguageModelSerializer
    lookup_field = "slug"
    lookup_value_regex = r"[-\w]+"

    def get_queryset(self):
        models = LanguageModel.objects.select_related("lab").order_by("name")
        if lab := query_text(self.request, "lab"):
            models = models.filter(lab__slug=lab)
        if text := query_text(self.request, "search"):
            models = models.filter(name__icontains=text)
        return models
