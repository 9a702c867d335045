"""/api/v1/runs/: runs, read; POST runs/import/ takes a whole KernelBench run (zip, JSON file or
JSON body), POST runs/<id>/verify/ queues every kernel of a run for evaluation here."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import PurePath

from django.conf import settings
from django.db.models import F
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_field
from rest_framework import serializers, status
from rest_framework.decorators import action
from rest_framework.exceptions import ValidationError
from rest_framework.generics import get_object_or_404
from rest_framework.request import Request
from rest_framework.response import Response

from leaderboard.api.base import (
    HardwareField,
    IdentityUrl,
    NameText,
    PlainText,
    ReadOnly,
    datetime_texts,
    query_param,
    row_urls,
)
from leaderboard.api.common import query_choice, query_text, run_upload_max_bytes
from leaderboard.api.imports import ImportResultSerializer, RowErrorsSerializer, import_counts, row_errors_reply
from leaderboard.api.pagination import CachedCountPagination
from leaderboard.api.parsers import BoundedMultiPartParser, StrictJSONParser
from leaderboard.api.permissions import CanImportRun, CanRequestEvaluation
from leaderboard.api.problems import ScoringRulesSerializer
from leaderboard.api.refusals import REFUSALS, refusal
from leaderboard.ingest.archives import Bundle
from leaderboard.ingest.generation_config import with_defaults
from leaderboard.ingest.run_import import (
    RunSpec,
    choose_problem_set,
    from_files,
    read_json_upload,
    read_zip,
    store_run,
    verify_run,
)
from leaderboard.ingest.uploads import RowErrors
from leaderboard.models import Origin, Precision, Run
from leaderboard.reviews.services import A_MAKER, run_maker, sees_maker
from problems.models import Hardware, ProblemSet


class RunSerializer(serializers.ModelSerializer):
    url = IdentityUrl(view_name="api:run-detail")
    model = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    model_name = serializers.CharField(source="model.name", read_only=True)
    problem_set = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    hardware = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    kernel_count = serializers.IntegerField(read_only=True)
    created_by = serializers.SerializerMethodField(
        help_text=f"Who made the run (imported or submitted it): the username to staff, reviewers and its maker, "
        f"{A_MAKER!r} to anyone else; null: the server."
    )
    rules = ScoringRulesSerializer(read_only=True, help_text="The rules the run is scored under.")

    @extend_schema_field(OpenApiTypes.STR)
    def get_created_by(self, run: Run) -> str | None:
        """The username only to who may see it (reviews.run_maker); a context that says
        `for_everyone` (a build kept for every visitor) always gets what anyone may see."""
        request = self.context.get("request")
        user = None if request is None or self.context.get("for_everyone") else request.user
        return run_maker(user, run)

    class Meta:
        model = Run
        fields = [
            "id",
            "url",
            "name",
            "model",
            "model_name",
            "problem_set",
            "hardware",
            "setting",
            "turns",
            "samples_per_problem",
            "precision",
            "rules",
            "origin",
            "published_source",
            "notes",
            "kernel_count",
            "created_by",
            "created_at",
        ]


# The list's rows, read as values() (base.ReadOnly.list): RunSerializer's fields and the maker's id and name.
RULES_VALUES = ("rules", "rules__slug", "rules__name", "rules__kernelbench_version", "rules__fp32_tolerance",
                "rules__fp16_tolerance", "rules__bf16_tolerance", "rules__correctness_trials",
                "rules__timing_method")  # fmt: skip
LIST_VALUES = ("id", "name", "model__slug", "model__name", "problem_set__slug", "hardware__slug", "setting", "turns",
               "samples_per_problem", "precision", *RULES_VALUES, "origin", "published_source", "notes", "n_kernels",
               "created_by", "created_by__username", "created_at")  # fmt: skip


def run_rows(request: Request, format: str | None) -> Callable[[dict], dict]:
    """Writes a values() row of LIST_VALUES as RunSerializer writes the run, for `request`'s user
    (tests/api/test_list_rows.py holds the two equal)."""
    url = row_urls(request, "api:run-detail", format)
    when = datetime_texts()
    user = request.user

    def write(row: dict) -> dict:
        maker = row["created_by"]
        return {
            "id": row["id"], "url": url(row["id"]), "name": row["name"], "model": row["model__slug"],
            "model_name": row["model__name"], "problem_set": row["problem_set__slug"],
            "hardware": row["hardware__slug"], "setting": row["setting"], "turns": row["turns"],
            "samples_per_problem": row["samples_per_problem"], "precision": row["precision"],
            "rules": rules_row(row), "origin": row["origin"], "published_source": row["published_source"],
            "notes": row["notes"], "kernel_count": row["n_kernels"],
            "created_by": None if maker is None else (row["created_by__username"] if sees_maker(user, maker)
                                                      else A_MAKER),
            "created_at": when(row["created_at"]),
        }  # fmt: skip

    return write


def rules_row(row: dict) -> dict | None:
    """The run's rules as ScoringRulesSerializer writes them, from a row of RULES_VALUES."""
    if row["rules"] is None:
        return None
    return {
        "slug": row["rules__slug"], "name": row["rules__name"],
        "kernelbench_version": row["rules__kernelbench_version"],
        "tolerance": {"fp32": row["rules__fp32_tolerance"], "fp16": row["rules__fp16_tolerance"],
                      "bf16": row["rules__bf16_tolerance"]},
        "correctness_trials": row["rules__correctness_trials"], "timing_method": row["rules__timing_method"],
    }  # fmt: skip


class RunImportSerializer(serializers.Serializer):
    """How an uploaded run is described; the kernels come as a zip `file` or a JSON `kernels` map."""

    model = NameText(
        max_length=120,
        required=False,
        help_text="Matched case-insensitively, or created. Default: the upload's generation_config.yaml model_name.",
    )
    organization = PlainText(max_length=120, required=False, allow_blank=True)
    hardware = HardwareField(help_text="Slug or name, case-insensitive.")
    problem_set = PlainText(
        max_length=120,
        required=False,
        allow_blank=True,
        help_text=(
            "Slug or name, case-insensitive. Default: the only set that holds every problem the kernels name; "
            "when several do (or none), the error lists the candidates with their slugs."
        ),
    )
    setting = PlainText(max_length=120, required=False, default="one-shot")
    name = PlainText(max_length=200, required=False, allow_blank=True, default="")
    level = serializers.IntegerField(
        min_value=1,
        max_value=4,
        required=False,
        allow_null=True,
        help_text="The level that bare problem ids in eval_results refer to, when the kernels span levels.",
    )
    notes = PlainText(multiline=True, required=False, allow_blank=True, default="")
    precision = serializers.ChoiceField(choices=Precision.choices, required=False, default=Precision.FP32)
    samples = serializers.IntegerField(
        min_value=1, max_value=10_000, required=False, allow_null=True, help_text="Samples per problem asked for."
    )

    def validate(self, data: dict) -> dict:
        if not (data.get("model") or "").strip():
            raise ValidationError({"model": "give the model (the upload has no generation_config.yaml model_name)"})
        return data


class RunUploadSerializer(RunImportSerializer):
    file = serializers.FileField(help_text="A zip of the run folder, or a JSON file shaped like the JSON body.")


class RunJsonSerializer(RunImportSerializer):
    kernels = serializers.DictField(
        child=serializers.CharField(allow_blank=True, trim_whitespace=False),
        help_text="File name (level_<L>_problem_<P>_sample_<S>_kernel.py) to source.",
    )
    eval_results = serializers.DictField(required=False, help_text="The run's eval_results.json, as an object.")


class RunImportResultSerializer(serializers.Serializer):
    run = RunSerializer()
    kernels = ImportResultSerializer()
    evaluations = ImportResultSerializer()
    warnings = serializers.ListField(child=serializers.CharField())


class VerifyResultSerializer(serializers.Serializer):
    queued = serializers.IntegerField()
    skipped = serializers.IntegerField(help_text="Kernels that already had an evaluation queued or running.")
    evaluations = serializers.ListField(child=serializers.IntegerField())


def read_run_upload(request):
    """(the run's described fields, its Bundle) from a zip or JSON `file`, or a JSON body with
    `kernels`. Raises RowErrors for a bad archive, ValidationError for a request of neither shape."""
    data = request.data
    if "file" in getattr(request, "FILES", {}):
        upload = request.FILES["file"]
        head = upload.read(4)
        upload.seek(0)
        if head.startswith(b"PK"):
            fields, bundle = {k: v for k, v in data.items() if k != "file"}, read_zip(upload)
        else:
            document, bundle = read_json_upload(upload.read())
            fields = {**document, **{k: v for k, v in data.items() if k != "file"}}
        if not fields.get("name"):  # like the command: generation_config.yaml's run_name, else the file's name
            fields["name"] = bundle.config.get("name") or PurePath(upload.name or "").stem[:200]
        return with_defaults(fields, bundle.config), bundle
    if isinstance(data, dict) and "kernels" in data:
        fields = {key: value for key, value in data.items() if key not in ("kernels", "eval_results")}
        shape = RunJsonSerializer(data=data)
        shape.is_valid(raise_exception=True)
        return fields, from_files(shape.validated_data["kernels"], data.get("eval_results"))
    raise ValidationError({"detail": "Send a zip or JSON `file` (multipart), or a JSON body with `kernels`."})


def run_spec(spec: dict, bundle: Bundle) -> RunSpec:
    """The validated RunImportSerializer data as the importer's RunSpec (RowErrors when the
    problem set named is unknown, or none is named and the kernels' problems do not pick one)."""
    return RunSpec(
        model=spec["model"].strip(),
        hardware=spec["hardware"],
        problem_set=choose_problem_set(spec.get("problem_set"), bundle.kernels),
        setting=spec["setting"],
        name=spec["name"],
        organization=spec.get("organization", ""),
        level=spec.get("level"),
        notes=spec["notes"],
        precision=spec["precision"],
        samples=spec.get("samples"),
    )


@extend_schema(
    parameters=[
        query_param("model", description="Model slug."),
        query_param("lab", description="Lab slug."),
        query_param("set", description="Problem set slug or name (case-insensitive)."),
        query_param("hardware", description="Hardware slug."),
        query_param("setting", description="Setting, exactly."),
        query_param("origin", description="measured or imported.", enum=[value for value, _ in Origin.choices]),
    ]
)
class RunViewSet(ReadOnly):
    """Runs: one model attempting one problem set, in one setting, on one hardware."""

    serializer_class = RunSerializer
    pagination_class = CachedCountPagination  # 50,000 runs at 13 M: counted once a minute, not per page
    list_values = LIST_VALUES

    def row_writer(self) -> Callable[[dict], dict]:
        return run_rows(self.request, self.format_kwarg)

    def body_max_bytes(self) -> int:
        """Whole-run uploads have their own cap; every other body the API's default."""
        return run_upload_max_bytes() if self.action == "import_run" else settings.API_BODY_MAX_BYTES

    def get_queryset(self):
        runs = Run.objects.annotate(kernel_count=F("n_kernels")).order_by("-created_at", "-pk")  # the boards store it
        if self.action != "list":
            # The list reads only LIST_VALUES (list_values), and its count's cache key
            # (CachedCountPaginator) compiles this query, about 1 ms more with the joins.
            runs = runs.select_related("model", "problem_set", "hardware", "rules", "created_by")
        if slug := query_text(self.request, "model"):
            runs = runs.filter(model__slug=slug)
        if slug := query_text(self.request, "lab"):
            runs = runs.filter(model__lab__slug=slug)
        if name := query_text(self.request, "set"):
            runs = runs.filter(problem_set=ProblemSet.objects.resolve(name))
        if slug := query_text(self.request, "hardware"):
            runs = runs.filter(hardware=Hardware.objects.resolve(slug))
        if setting := query_text(self.request, "setting"):
            runs = runs.filter(setting=setting)
        if origin := query_choice(self.request, "origin", Origin.choices):
            runs = runs.filter(origin=origin)
        return runs

    @extend_schema(
        summary="Import a whole KernelBench run",
        description=(
            "A run folder as a zip (multipart `file`), a JSON file of the JSON body's shape, or a JSON body "
            "with `kernels` ({file name: source}) and optional `eval_results`. Imported results are stored "
            "as 'imported, unverified'. All or nothing: any problem gives 400 with every error listed."
        ),
        request={"multipart/form-data": RunUploadSerializer, "application/json": RunJsonSerializer},
        responses={
            201: RunImportResultSerializer,
            200: RunImportResultSerializer,
            400: RowErrorsSerializer,
            409: OpenApiResponse(description="Past the user's quota of stored kernel source."),
        },
    )
    @action(
        detail=False,
        methods=["post"],
        url_path="import",
        permission_classes=[CanImportRun],
        parser_classes=[BoundedMultiPartParser, StrictJSONParser],
    )
    def import_run(self, request):
        try:
            fields, bundle = read_run_upload(request)
        except RowErrors as exc:
            return Response(row_errors_reply(exc.errors, "upload"), status=status.HTTP_400_BAD_REQUEST)
        spec = RunImportSerializer(data=fields)
        spec.is_valid(raise_exception=True)
        try:
            result = store_run(run_spec(spec.validated_data, bundle), bundle, by=request.user)
        except RowErrors as exc:
            return Response(row_errors_reply(exc.errors, "upload"), status=status.HTTP_400_BAD_REQUEST)
        except REFUSALS as exc:
            return refusal(exc)
        body = {
            "run": RunSerializer(self.get_queryset().get(pk=result.run.pk), context={"request": request}).data,
            "kernels": import_counts(result.kernels),
            "evaluations": import_counts(result.evaluations),
            "warnings": result.warnings + [f"ignored {name}" for name in bundle.ignored[:20]],
        }
        created = result.kernels.counts["created"] or result.evaluations.counts["created"]
        return Response(body, status=status.HTTP_201_CREATED if created else status.HTTP_200_OK)

    @extend_schema(
        summary="Queue every kernel of the run for evaluation here",
        request=None,
        responses={
            202: VerifyResultSerializer,
            403: OpenApiResponse(description="The run is another user's."),
            429: OpenApiResponse(description="Past the user's quota of queued-or-running evaluations."),
        },
    )
    @action(detail=True, methods=["post"], permission_classes=[CanRequestEvaluation])
    def verify(self, request, pk=None):
        run = get_object_or_404(Run.objects.select_related("hardware"), pk=pk)
        try:
            queued, skipped = verify_run(run, by=request.user)  # PermissionDenied (403) unless the run is theirs
        except REFUSALS as exc:
            return refusal(exc)
        return Response(
            {"queued": len(queued), "skipped": skipped, "evaluations": [evaluation.pk for evaluation in queued]},
            status=status.HTTP_202_ACCEPTED,
        )
