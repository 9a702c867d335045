"""API views: public reads with filters, permissioned writes that ingest through the services in
leaderboard/ (reported_scores, launch_posts, run_import, submissions)."""

from __future__ import annotations

from pathlib import PurePath

from django.db.models import Count, Prefetch
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, inline_serializer
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import ValidationError
from rest_framework.generics import get_object_or_404
from rest_framework.parsers import JSONParser, MultiPartParser
from rest_framework.renderers import BrowsableAPIRenderer
from rest_framework.response import Response
from rest_framework.reverse import reverse
from rest_framework.views import APIView

from leaderboard.api import serializers as s
from leaderboard.api.common import (
    check_body_size,
    query_bool,
    query_choice,
    query_float,
    query_int,
    query_text,
    row_errors_reply,
    run_upload_max_bytes,
    submission_max_bytes,
    table_max_bytes,
)
from leaderboard.api.parsers import CsvParser
from leaderboard.api.permissions import (
    CanAddLaunchPost,
    CanAddReportedScore,
    CanAddReview,
    CanImportRun,
    CanRequestEvaluation,
    CanSubmitKernel,
)
from leaderboard.api.renderers import AsciiJSONRenderer
from leaderboard.api.throttling import WriteRateThrottle
from leaderboard.ingest import launch_posts, reported_scores
from leaderboard.ingest.reported_scores import RowErrors
from leaderboard.ingest.run_import import (
    BundleError,
    RunSpec,
    default_problem_set,
    from_files,
    read_json_upload,
    read_zip,
    store_run,
    verify_run,
)
from leaderboard.ingest.submissions import submit_kernel
from leaderboard.models import Evaluation, Kernel, Lab, LanguageModel, LaunchPost, Origin, ReportedScore, Review, Run
from leaderboard.reads.standings import level_standings
from leaderboard.reviews.services import record_verdict
from problems.models import Hardware, Problem, ProblemSet


def _param(name: str, type_=str, description: str = "", enum=None) -> OpenApiParameter:
    return OpenApiParameter(name, type_, OpenApiParameter.QUERY, required=False, description=description, enum=enum)


class ReadOnly(viewsets.ReadOnlyModelViewSet):
    # Lists and details; a `detail_serializer_class` adds the large fields on detail pages.

    detail_serializer_class: type[serializers.Serializer] | None = None
    throttle_classes = [WriteRateThrottle]
    renderer_classes = [AsciiJSONRenderer, BrowsableAPIRenderer]
    lookup_value_regex = r"\d+"  # ids; viewsets looked up by slug say so

    def get_serializer_class(self):
        if self.action == "retrieve" and self.detail_serializer_class is not None:
            return self.detail_serializer_class
        return super().get_serializer_class()


# ---------------------------------------------------------------------------------------------
# Problems and hardware


class ProblemSetViewSet(ReadOnly):
    """Problem sets (versions of KernelBench); fast_p is always computed against one set."""

    queryset = ProblemSet.objects.annotate(problem_count=Count("problems")).order_by("name")
    serializer_class = s.ProblemSetSerializer
    detail_serializer_class = s.ProblemSetDetailSerializer
    lookup_field = "slug"
    lookup_value_regex = r"[-\w]+"


@extend_schema(
    parameters=[
        _param("set", description="Problem set slug."),
        _param("level", int, "Level, 1-4."),
        _param("tag", description="One tag, e.g. matmul."),
        _param("search", description="Text in the name or tags."),
    ]
)
class ProblemViewSet(ReadOnly):
    """Problems; the detail includes the reference source."""

    serializer_class = s.ProblemSerializer
    detail_serializer_class = s.ProblemDetailSerializer

    def get_queryset(self):
        problems = Problem.objects.select_related("problem_set").order_by("problem_set__name", "level", "number")
        if self.action != "list":
            return problems
        if slug := query_text(self.request, "set"):
            problems = problems.filter(problem_set__slug=slug)
        if (level := query_int(self.request, "level", low=1, high=4)) is not None:
            problems = problems.filter(level=level)
        if tag := query_text(self.request, "tag"):
            problems = problems.filter(tags__icontains=tag.lower())
        if text := query_text(self.request, "search"):
            problems = problems.search(text)
        return problems.defer("source")


class HardwareViewSet(ReadOnly):
    """Hardware classes that evaluations run on, and what workers report about them."""

    queryset = Hardware.objects.order_by("slug")
    serializer_class = s.HardwareSerializer
    lookup_field = "slug"
    lookup_value_regex = r"[-\w]+"


# ---------------------------------------------------------------------------------------------
# Labs, models, runs, kernels, evaluations


class LabViewSet(ReadOnly):
    """Labs that make language models."""

    queryset = Lab.objects.order_by("name")
    serializer_class = s.LabSerializer
    lookup_field = "slug"
    lookup_value_regex = r"[-\w]+"


@extend_schema(parameters=[_param("lab", description="Lab slug."), _param("search", description="Text in the name.")])
class LanguageModelViewSet(ReadOnly):
    """Language models that write kernels."""

    serializer_class = s.LanguageModelSerializer
    lookup_field = "slug"
    lookup_value_regex = r"[-\w]+"

    def get_queryset(self):
        models = LanguageModel.objects.select_related("lab").order_by("name")
        if lab := query_text(self.request, "lab"):
            models = models.filter(lab__slug=lab)
        if text := query_text(self.request, "search"):
            models = models.filter(name__icontains=text)
        return models


@extend_schema(
    parameters=[
        _param("model", description="Model slug."),
        _param("lab", description="Lab slug."),
        _param("set", description="Problem set slug."),
        _param("hardware", description="Hardware slug."),
        _param("setting", description="Setting, exactly."),
        _param("origin", description="measured or imported.", enum=[value for value, _ in Origin.choices]),
    ]
)
class RunViewSet(ReadOnly):
    """Runs: one model attempting one problem set, in one setting, on one hardware."""

    serializer_class = s.RunSerializer

    def get_queryset(self):
        runs = (
            Run.objects.select_related("model", "problem_set", "hardware")
            .annotate(kernel_count=Count("kernels"))
            .order_by("-created_at", "-pk")
        )
        if slug := query_text(self.request, "model"):
            runs = runs.filter(model__slug=slug)
        if slug := query_text(self.request, "lab"):
            runs = runs.filter(model__lab__slug=slug)
        if slug := query_text(self.request, "set"):
            runs = runs.filter(problem_set__slug=slug)
        if slug := query_text(self.request, "hardware"):
            runs = runs.filter(hardware__slug=slug)
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
        request={"multipart/form-data": s.RunUploadSerializer, "application/json": s.RunJsonSerializer},
        responses={201: s.RunImportResultSerializer, 200: s.RunImportResultSerializer, 400: s.RowErrorsSerializer},
    )
    @action(
        detail=False,
        methods=["post"],
        url_path="import",
        permission_classes=[CanImportRun],
        parser_classes=[MultiPartParser, JSONParser],
    )
    def import_run(self, request):
        check_body_size(request, run_upload_max_bytes())
        data = request.data
        try:
            if "file" in getattr(request, "FILES", {}):
                upload = request.FILES["file"]
                head = upload.read(4)
                upload.seek(0)
                if head.startswith(b"PK"):
                    fields, bundle = {k: v for k, v in data.items() if k != "file"}, read_zip(upload)
                else:
                    document, bundle = read_json_upload(upload.read())
                    fields = {**document, **{k: v for k, v in data.items() if k != "file"}}
                if not fields.get("name"):
                    fields["name"] = PurePath(upload.name or "").stem[:200]  # like the command: the file's name
            elif isinstance(data, dict) and "kernels" in data:
                fields = {key: value for key, value in data.items() if key not in ("kernels", "eval_results")}
                shape = s.RunJsonSerializer(data=data)
                shape.is_valid(raise_exception=True)
                bundle = from_files(shape.validated_data["kernels"], data.get("eval_results"))
            else:
                raise ValidationError(
                    {"detail": "Send a zip or JSON `file` (multipart), or a JSON body with `kernels`."}
                )
        except BundleError as exc:
            return Response(row_errors_reply(exc.errors, "upload"), status=status.HTTP_400_BAD_REQUEST)
        spec_data = s.RunImportSerializer(data=fields)
        spec_data.is_valid(raise_exception=True)
        spec = spec_data.validated_data
        try:
            problem_set = spec.get("problem_set") or default_problem_set()
            result = store_run(
                RunSpec(
                    model=spec["model"].strip(),
                    hardware=spec["hardware"],
                    problem_set=problem_set,
                    setting=spec["setting"],
                    name=spec["name"],
                    organization=spec.get("organization", ""),
                    level=spec.get("level"),
                    notes=spec["notes"],
                ),
                bundle,
                user=request.user,
            )
        except BundleError as exc:
            return Response(row_errors_reply(exc.errors, "upload"), status=status.HTTP_400_BAD_REQUEST)
        run = self.get_queryset().get(pk=result.run.pk)
        body = {
            "run": s.RunSerializer(run, context={"request": request}).data,
            "kernels": _report(result.kernels),
            "evaluations": _report(result.evaluations),
            "warnings": result.warnings + [f"ignored {name}" for name in bundle.ignored[:20]],
        }
        created = result.kernels.counts["created"] or result.evaluations.counts["created"]
        return Response(body, status=status.HTTP_201_CREATED if created else status.HTTP_200_OK)

    @extend_schema(
        summary="Queue every kernel of the run for evaluation here",
        request=None,
        responses={202: s.VerifyResultSerializer},
    )
    @action(detail=True, methods=["post"], permission_classes=[CanRequestEvaluation])
    def verify(self, request, pk=None):
        run = get_object_or_404(Run.objects.select_related("hardware"), pk=pk)
        queued, skipped = verify_run(run)
        return Response(
            {"queued": len(queued), "skipped": skipped, "evaluations": [evaluation.pk for evaluation in queued]},
            status=status.HTTP_202_ACCEPTED,
        )


def _report(report) -> dict:
    return {
        "created": report.counts["created"],
        "updated": report.counts["updated"],
        "unchanged": report.counts["unchanged"],
        "warnings": report.warnings,
    }


@extend_schema(
    parameters=[
        _param("run", int, "Run id."),
        _param("problem", int, "Problem id."),
        _param("model", description="Model slug."),
        _param("set", description="Problem set slug."),
        _param("level", int, "Level, 1-4."),
        _param("backend", description="cuda, triton, cpp, torch, other.", enum=[v for v, _ in Kernel.Backend.choices]),
    ]
)
class KernelViewSet(ReadOnly):
    """Kernels (generated solutions); the detail includes the source."""

    serializer_class = s.KernelSerializer
    detail_serializer_class = s.KernelDetailSerializer

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
        if slug := query_text(self.request, "set"):
            kernels = kernels.filter(problem__problem_set__slug=slug)
        if (level := query_int(self.request, "level", low=1, high=4)) is not None:
            kernels = kernels.filter(problem__level=level)
        if backend := query_choice(self.request, "backend", Kernel.Backend.choices):
            kernels = kernels.filter(backend=backend)
        return kernels.defer("source")


@extend_schema(
    parameters=[
        _param("kernel", int, "Kernel id."),
        _param("run", int, "Run id."),
        _param("hardware", description="Hardware slug."),
        _param("state", enum=[v for v, _ in Evaluation.State.choices]),
        _param("status", enum=[v for v, _ in Evaluation.Status.choices]),
        _param("origin", enum=[v for v, _ in Origin.choices]),
    ]
)
class EvaluationViewSet(ReadOnly):
    """Evaluations of kernels, measured here or imported; the detail includes the log."""

    serializer_class = s.EvaluationSerializer
    detail_serializer_class = s.EvaluationDetailSerializer

    def get_queryset(self):
        evaluations = Evaluation.objects.select_related("hardware", "kernel").order_by("-queued_at", "-pk")
        if self.action != "list":
            return evaluations
        if (kernel := query_int(self.request, "kernel", low=1)) is not None:
            evaluations = evaluations.filter(kernel_id=kernel)
        if (run := query_int(self.request, "run", low=1)) is not None:
            evaluations = evaluations.filter(kernel__run_id=run)
        if slug := query_text(self.request, "hardware"):
            evaluations = evaluations.filter(hardware__slug=slug)
        if state := query_choice(self.request, "state", Evaluation.State.choices):
            evaluations = evaluations.filter(state=state)
        if value := query_choice(self.request, "status", Evaluation.Status.choices):
            evaluations = evaluations.filter(status=value)
        if origin := query_choice(self.request, "origin", Origin.choices):
            evaluations = evaluations.filter(origin=origin)
        return evaluations.defer("log", "environment")


# ---------------------------------------------------------------------------------------------
# Reported scores and launch posts: read, and ingest as JSON rows or CSV


class TableIngestMixin:
    """POST of rows as JSON (one object or a list), as a CSV body (text/csv) or as a CSV `file`
    (multipart). All or nothing: any bad row gives 400 listing every error, and nothing is written."""

    parser_classes = [JSONParser, CsvParser, MultiPartParser]
    noun = "rows"

    def parse_json(self, data):  # pragma: no cover - overridden
        raise NotImplementedError

    def parse_csv(self, text: str, name: str):  # pragma: no cover - overridden
        raise NotImplementedError

    def store(self, rows, user):  # pragma: no cover - overridden
        raise NotImplementedError

    def create(self, request, *args, **kwargs):
        check_body_size(request, table_max_bytes())
        data = request.data
        try:
            if isinstance(data, str):
                rows = self.parse_csv(data, "CSV body")
            elif "file" in getattr(request, "FILES", {}):
                upload = request.FILES["file"]
                try:
                    text = upload.read().decode("utf-8").removeprefix("\ufeff")
                except UnicodeDecodeError as exc:
                    raise RowErrors([f"{upload.name}: byte {exc.start} is not UTF-8"]) from None
                rows = self.parse_csv(text, upload.name)
            elif request.content_type.startswith("multipart/"):
                raise RowErrors(["send the CSV as a multipart field named `file`"])
            else:
                rows = self.parse_json(data)
        except RowErrors as exc:
            return Response(row_errors_reply(exc.errors, self.noun), status=status.HTTP_400_BAD_REQUEST)
        report = self.store(rows, request.user)
        body = _report(report)
        return Response(body, status=status.HTTP_201_CREATED if report.counts["created"] else status.HTTP_200_OK)


_TABLE_RESPONSES = {201: s.ImportResultSerializer, 200: s.ImportResultSerializer, 400: s.RowErrorsSerializer}


@extend_schema(
    parameters=[
        _param("model", description="Model slug."),
        _param("lab", description="Lab slug."),
        _param("metric", description="Metric, exactly (e.g. fast_1)."),
        _param("variant", description="Text in the variant."),
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
        "application/json": s.ReportedScoreRowSerializer(many=True),
        "text/csv": OpenApiTypes.STR,
        "multipart/form-data": s.CsvUploadSerializer,
    },
    responses=_TABLE_RESPONSES,
)
class ReportedScoreViewSet(TableIngestMixin, mixins.CreateModelMixin, ReadOnly):
    """Scores that labs and papers published, always shown apart from scores measured here."""

    serializer_class = s.ReportedScoreSerializer
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
        return reported_scores.store_rows(rows, entered_by=user)


@extend_schema(
    parameters=[
        _param("lab", description="Lab slug."),
        _param("model", description="Model slug."),
        _param("lists_kernelbench", bool, "Only posts that list KernelBench (true) or not (false)."),
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
        "application/json": s.LaunchPostRowSerializer(many=True),
        "text/csv": OpenApiTypes.STR,
        "multipart/form-data": s.CsvUploadSerializer,
    },
    responses=_TABLE_RESPONSES,
)
class LaunchPostViewSet(TableIngestMixin, mixins.CreateModelMixin, ReadOnly):
    """Labs' model launch posts, and whether they list KernelBench."""

    serializer_class = s.LaunchPostSerializer
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
        return launch_posts.store_rows(rows)


# ---------------------------------------------------------------------------------------------
# Reviews


@extend_schema(
    parameters=[_param("kernel", int, "Kernel id."), _param("verdict", enum=[v for v, _ in Review.Verdict.choices])]
)
class ReviewViewSet(mixins.CreateModelMixin, ReadOnly):
    """Reviewers' verdicts on kernels (an audit trail; the latest counts)."""

    serializer_class = s.ReviewSerializer
    permission_classes = [CanAddReview]

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
        check_body_size(request, 100_000)
        return super().create(request, *args, **kwargs)

    def perform_create(self, serializer):
        # The reviewer workflow's one way to record a verdict ("needs rerun" also queues an evaluation).
        data = serializer.validated_data
        serializer.instance = record_verdict(
            data["kernel"], self.request.user, data["verdict"], data.get("note", "")
        ).review


# ---------------------------------------------------------------------------------------------
# Submissions and the leaderboard


class SubmissionView(APIView):
    permission_classes = [CanSubmitKernel]
    throttle_classes = [WriteRateThrottle]
    renderer_classes = [AsciiJSONRenderer, BrowsableAPIRenderer]
    parser_classes = [JSONParser, MultiPartParser]

    @extend_schema(
        summary="Submit one kernel for evaluation here",
        description="Saves the kernel (in the run given, or the model's run of submissions) and queues its "
        "evaluation on the hardware's queue. Poll the returned url for the result.",
        request=s.SubmissionSerializer,
        responses={
            202: s.SubmissionResultSerializer,
            400: OpenApiResponse(description="Bad input."),
            413: OpenApiResponse(description="Source too large."),
        },
    )
    def post(self, request):
        check_body_size(request, submission_max_bytes())
        serializer = s.SubmissionSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        evaluation = submit_kernel(
            problem=data["problem"],
            source=data["source"],
            hardware=data["hardware"],
            model=data.get("model"),
            run=data.get("run"),
            setting=data["setting"],
            user=request.user,
        )
        url = reverse("api:evaluation-detail", args=[evaluation.pk], request=request)
        body = {
            "id": evaluation.pk,
            "kernel": evaluation.kernel_id,
            "run": evaluation.kernel.run_id,
            "status": evaluation.state,
            "url": url,
        }
        return Response(body, status=status.HTTP_202_ACCEPTED, headers={"Location": url})


class LeaderboardView(APIView):
    permission_classes: list[type] = []
    renderer_classes = [AsciiJSONRenderer, BrowsableAPIRenderer]

    @extend_schema(
        summary="Per-run fast_p table of one level (or all levels)",
        description="Computed by leaderboard.reads.standings, the same code the pages use. fast_p keys are named "
        "fast_<p> (fast_0, fast_0.5, fast_0.8, fast_1, fast_1.5, fast_2, plus the p asked).",
        parameters=[
            _param("set", description="Problem set slug; needed when more than one set exists."),
            _param("level", int, "Level 1-4; absent for all levels together."),
            _param("p", float, "The speedup threshold to rank by (default 1.0)."),
            _param("hardware", description="Hardware slug."),
            _param("setting", description="Setting, exactly."),
            _param("origin", enum=[v for v, _ in Origin.choices]),
            _param("include_excluded", bool, "Count kernels judged reward hacks or invalid too (default false)."),
        ],
        responses={
            200: inline_serializer(
                "Leaderboard",
                {
                    "problem_set": serializers.CharField(),
                    "level": serializers.IntegerField(allow_null=True),
                    "p": serializers.FloatField(),
                    "hardware": serializers.CharField(allow_null=True),
                    "results": inline_serializer(
                        "LeaderboardRow",
                        {
                            "rank": serializers.IntegerField(),
                            "run": s.RunSerializer(),
                            "fast_p": serializers.FloatField(),
                            "unscored": serializers.IntegerField(help_text="Correct kernels with no known speedup."),
                            "flagged": serializers.IntegerField(),
                            "unreviewed": serializers.IntegerField(),
                            "excluded": serializers.IntegerField(),
                            "summary": serializers.DictField(),
                        },
                        many=True,
                    ),
                },
            )
        },
    )
    def get(self, request):
        slug = query_text(request, "set")
        if slug:
            problem_set = ProblemSet.objects.filter(slug=slug).first()
            if problem_set is None:
                raise ValidationError({"set": f"no problem set {slug!r}"})
        else:
            sets = list(ProblemSet.objects.order_by("name")[:2])
            if len(sets) != 1:
                raise ValidationError({"set": "give a problem set slug" if sets else "no problem set exists yet"})
            problem_set = sets[0]
        level = query_int(request, "level", low=1, high=4)
        p = query_float(request, "p", low=0.0, high=1000.0)
        hardware = None
        if hardware_slug := query_text(request, "hardware"):
            hardware = Hardware.objects.filter(slug=hardware_slug).first()
            if hardware is None:
                raise ValidationError({"hardware": f"no hardware {hardware_slug!r}"})
        origin = query_choice(request, "origin", Origin.choices)
        rows = level_standings(
            problem_set,
            level,
            p=p,
            hardware=hardware,
            setting=query_text(request, "setting"),
            origin=origin,
            include_excluded=bool(query_bool(request, "include_excluded")),
        )
        shown_p = 1.0 if p is None else p
        run_ids = [row.run.pk for row in rows]
        kernel_counts = dict(Run.objects.filter(pk__in=run_ids).annotate(n=Count("kernels")).values_list("pk", "n"))
        results = []
        for rank, row in enumerate(rows, start=1):
            row.run.kernel_count = kernel_counts.get(row.run.pk, 0)
            results.append(
                {
                    "rank": rank,
                    "run": s.RunSerializer(row.run, context={"request": request}).data,
                    "fast_p": row.fast_p(shown_p),
                    "unscored": row.unscored,
                    "flagged": row.flagged,
                    "unreviewed": row.unreviewed,
                    "excluded": row.excluded,
                    "summary": row.summary,
                }
            )
        return Response(
            {
                "problem_set": problem_set.slug,
                "level": level,
                "p": shown_p,
                "hardware": hardware.slug if hardware else None,
                "results": results,
            }
        )
