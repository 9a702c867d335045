"""A run's sub-resources in the REST API (under /api/v1/, routed in leaderboard/api/urls.py beside
/api/v1/runs/<id>/, which gives the run itself: leaderboard/api/runs.py). All public reads:

- GET /api/v1/runs/<id>/problems/        every problem with its samples (status, speedup, flags);
- GET /api/v1/runs/<id>/progress/        verification progress (small: the run page polls it);
- GET /api/v1/runs/<id>/scores/          per level: KernelBench's sample-0 scores, best-of-n, fast_p curves;
- GET /api/v1/runs/<id>/compare/<other>/ sample 0 of each problem of both runs side by side;
- GET /api/v1/runs/<id>/export/          the run as a KernelBench run folder (zip); ?level=L for one level.

The page and these resources read the same functions (leaderboard.reads.runs).
"""

from __future__ import annotations

from django.http import HttpResponse
from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.permissions import AllowAny
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from leaderboard.ingest.kernelbench_export import ExportError, export_run, folder_name
from leaderboard.models import Run
from leaderboard.reads import runs as reads
from leaderboard.reviews.services import can_read_raw_output
from problems.models import LEVELS

LEVEL_PARAM = OpenApiParameter("level", int, description="only this level (1-4)", enum=list(LEVELS))


def _run(pk: int) -> Run:
    return get_object_or_404(reads.run_for_page(pk))


def _level(request: Request) -> int | None:
    text = request.query_params.get("level", "").strip()
    if not text:
        return None
    if text not in {str(level) for level in LEVELS}:
        raise ValidationError({"level": f"must be one of {', '.join(map(str, LEVELS))}"})
    return int(text)


def run_summary(run: Run) -> dict:
    return {
        "id": run.pk,
        "model": run.model.name,
        "setting": run.setting,
        "precision": run.precision,
        "hardware": run.hardware.slug,
        "problem_set": run.problem_set.slug,
        "origin": run.origin,
        "samples_per_problem": run.samples_per_problem,
    }


class RunResource(APIView):
    """Public reads only: these resources have no writes."""

    permission_classes = [AllowAny]
    http_method_names = ["get", "head", "options"]


class RunProblemsView(RunResource):
    @extend_schema(summary="A run's problems and samples", parameters=[LEVEL_PARAM], responses=OpenApiTypes.OBJECT)
    def get(self, request: Request, pk: int) -> Response:
        run = _run(pk)
        level = _level(request)
        lines = [line for line in reads.run_problems(run) if level is None or line.level == level]
        return Response({"run": run_summary(run), "problems": [line.as_dict() for line in lines]})


class RunProgressView(RunResource):
    @extend_schema(summary="A run's verification progress", responses=OpenApiTypes.OBJECT)
    def get(self, request: Request, pk: int) -> Response:
        run = get_object_or_404(Run.objects.only("pk"), pk=pk)
        return Response({"run": run.pk, **reads.run_progress(run).as_dict()})


class RunScoresView(RunResource):
    @extend_schema(summary="A run's scores per level (sample 0, best-of-n)", responses=OpenApiTypes.OBJECT)
    def get(self, request: Request, pk: int) -> Response:
        run = _run(pk)
        scores = reads.run_scores(run, reads.run_problems(run))
        progress = reads.run_progress(run)
        return Response(
            {"run": run_summary(run), "progress": progress.as_dict(), "levels": [s.as_dict() for s in scores]}
        )


class RunCompareView(RunResource):
    @extend_schema(summary="Two runs side by side (sample 0 of each problem)", responses=OpenApiTypes.OBJECT)
    def get(self, request: Request, pk: int, other: int) -> Response:
        run = _run(pk)
        other_run = reads.run_for_page(other).first()
        if other_run is None:
            raise NotFound(f"no run {other}")
        lines = reads.compare(reads.run_problems(run), reads.run_problems(other_run))
        return Response(
            {
                "left": run_summary(run),
                "right": run_summary(other_run),
                "summary": reads.compare_summary(lines),
                "problems": [line.as_dict() for line in lines],
            }
        )


class ZipRenderer(BaseRenderer):
    """Lets a client ask for `Accept: application/zip`; the zip itself is sent as it is."""

    media_type = "application/zip"
    format = "zip"
    charset = None
    render_style = "binary"

    def render(self, data, accepted_media_type=None, renderer_context=None) -> bytes:
        return data if isinstance(data, bytes) else JSONRenderer().render(data)


class RunExportView(RunResource):
    renderer_classes = [JSONRenderer, ZipRenderer]

    @extend_schema(
        summary="The run as a KernelBench run folder (zip)",
        parameters=[LEVEL_PARAM],
        responses={(200, "application/zip"): OpenApiResponse(OpenApiTypes.BINARY)},
    )
    def get(self, request: Request, pk: int) -> HttpResponse:
        run = _run(pk)
        level = _level(request)
        try:
            # Error text is the kernel's own output: for who may read it (disclosure.py).
            data = export_run(run, level, with_error=lambda kernel: can_read_raw_output(request.user, kernel))
        except ExportError as exc:
            raise NotFound(str(exc)) from None
        suffix = f"_level_{level}" if level else ""
        response = HttpResponse(data, content_type="application/zip")
        response["Content-Disposition"] = f'attachment; filename="{folder_name(run)}{suffix}.zip"'
        return response
