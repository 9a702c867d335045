"""POST /api/v1/submissions/: one kernel, saved and queued for evaluation here."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.renderers import BrowsableAPIRenderer
from rest_framework.response import Response
from rest_framework.reverse import reverse
from rest_framework.views import APIView

from leaderboard.api.base import HardwareField, ModelNameField, PlainText
from leaderboard.api.common import submission_max_bytes
from leaderboard.api.parsers import BoundedMultiPartParser, StrictJSONParser
from leaderboard.api.permissions import CanSubmitKernel
from leaderboard.api.refusals import REFUSALS, refusal
from leaderboard.api.renderers import AsciiJSONRenderer
from leaderboard.ingest.submissions import SubmissionError, check_source, check_target, submit_kernel
from leaderboard.models import Run
from problems.models import Problem


class SubmissionSerializer(serializers.Serializer):
    problem = serializers.PrimaryKeyRelatedField(
        queryset=Problem.objects.select_related("problem_set"),
        help_text="The problem's id: /api/v1/problems/?set=SET&level=L&number=N finds it.",
        error_messages={
            "does_not_exist": "no problem {pk_value}; find a problem's id with /api/v1/problems/?set=SET&level=L&number=N"
        },
    )
    source = serializers.CharField(trim_whitespace=False, help_text="Python source defining class ModelNew.")
    hardware = HardwareField(
        required=False,
        help_text="Where to evaluate; defaults to the run's hardware when a run is given.",
    )
    model = ModelNameField(required=False, help_text="The model's slug, name or one of its aliases.")
    run = serializers.PrimaryKeyRelatedField(
        queryset=Run.objects.select_related("problem_set", "hardware", "model"), required=False
    )
    setting = PlainText(max_length=120, required=False, default="submitted")

    def validate_source(self, source: str) -> str:
        try:
            check_source(source)
        except SubmissionError as exc:
            raise serializers.ValidationError(str(exc)) from None
        return source

    def validate(self, data: dict) -> dict:
        user = self.context["request"].user
        try:
            data["hardware"] = check_target(
                data["problem"], data.get("hardware"), data.get("model"), data.get("run"), user
            )
        except SubmissionError as exc:
            raise serializers.ValidationError({exc.field or "non_field_errors": str(exc)}) from None
        return data


class SubmissionResultSerializer(serializers.Serializer):
    id = serializers.IntegerField(help_text="The evaluation's id.")
    kernel = serializers.IntegerField()
    run = serializers.IntegerField()
    status = serializers.CharField(help_text="The evaluation's state: queued at first.")
    url = serializers.URLField(help_text="Poll this for the result.")


class SubmissionView(APIView):
    permission_classes = [CanSubmitKernel]
    renderer_classes = [AsciiJSONRenderer, BrowsableAPIRenderer]
    parser_classes = [StrictJSONParser, BoundedMultiPartParser]

    def body_max_bytes(self) -> int:
        return submission_max_bytes()

    @extend_schema(
        summary="Submit one kernel for evaluation here",
        description="Saves the kernel (in the run given, or the model's run of submissions) and queues its "
        "evaluation on the hardware's queue. Poll the returned url for the result.",
        request=SubmissionSerializer,
        responses={
            202: SubmissionResultSerializer,
            400: OpenApiResponse(description="Bad input."),
            409: OpenApiResponse(description="Past the user's quota of stored kernel source."),
            413: OpenApiResponse(description="Source too large."),
            429: OpenApiResponse(description="Past the user's quota of queued-or-running evaluations."),
        },
    )
    def post(self, request):
        serializer = SubmissionSerializer(data=request.data, context={"request": request})
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        try:
            evaluation = submit_kernel(
                problem=data["problem"],
                source=data["source"],
                hardware=data["hardware"],
                model=data.get("model"),
                run=data.get("run"),
                setting=data["setting"],
                by=request.user,
            )
        except REFUSALS as exc:
            return refusal(exc)
        url = reverse("api:evaluation-detail", args=[evaluation.pk], request=request)
        body = {
            "id": evaluation.pk,
            "kernel": evaluation.kernel_id,
            "run": evaluation.kernel.run_id,
            "status": evaluation.state,
            "url": url,
        }
        return Response(body, status=status.HTTP_202_ACCEPTED, headers={"Location": url})
