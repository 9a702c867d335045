"""/api/v1/evaluations/: evaluations of kernels, measured here or imported, read only; where a
queued or running one stands (its progress) on the detail. The log and error text, worker details
and the sandbox's private environment go to reviewers, admins and the kernel's submitter only
(leaderboard/reads/disclosure.py); others get them withheld, named in `withheld`."""

from __future__ import annotations

from collections.abc import Callable

from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import serializers
from rest_framework.request import Request

from leaderboard.api.base import IdentityUrl, ReadOnly, datetime_texts, query_param, row_urls
from leaderboard.api.common import query_choice, query_int, query_text
from leaderboard.api.pagination import CachedCountPagination
from leaderboard.evaluations import progress as lifecycle
from leaderboard.models import Evaluation, Origin
from leaderboard.reads import disclosure
from leaderboard.reviews.services import can_read_raw_output, reads_raw_output
from problems.models import Hardware


# An evaluation as a kernel shows it (its latest, and its history).
class EvaluationBriefSerializer(serializers.ModelSerializer):
    class Meta:
        model = Evaluation
        fields = ["id", "origin", "state", "status", "compiled", "correct", "speedup", "finished_at"]


class EvaluationSerializer(serializers.ModelSerializer):
    url = IdentityUrl(view_name="api:evaluation-detail")
    withheld = serializers.SerializerMethodField(
        help_text="Fields left out (null) for this caller: the log and error text are shown to reviewers, admins "
        "and the kernel's submitter only."
    )
    hardware = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    run = serializers.IntegerField(source="kernel.run_id", read_only=True)
    problem = serializers.IntegerField(source="kernel.problem_id", read_only=True)

    class Meta:
        model = Evaluation
        fields = [
            "id",
            "url",
            "kernel",
            "run",
            "problem",
            "hardware",
            "origin",
            "state",
            "status",
            "compiled",
            "correct",
            "speedup",
            "speedup_low",
            "speedup_high",
            "kernel_ms",
            "reference_ms",
            "kernel_timing",
            "reference_timing",
            "max_abs_diff",
            "max_rel_diff",
            "trials_passed",
            "trials_total",
            "flags",
            "notes",
            "error",
            "attempts",
            "failure_reason",
            "queued_at",
            "started_at",
            "finished_at",
            "withheld",
        ]

    def get_withheld(self, evaluation: Evaluation) -> list[str]:
        return []  # filled in by to_representation for callers who may not read them

    def to_representation(self, evaluation: Evaluation) -> dict:
        data = super().to_representation(evaluation)
        request = self.context.get("request")
        if can_read_raw_output(getattr(request, "user", None), evaluation.kernel):
            return data
        return disclosure.public_evaluation_data(data, evaluation.worker_name)


# The list's rows, read as values() (base.ReadOnly.list): EvaluationSerializer's fields, plus who may
# read the raw output (can_read_raw_output) and the worker's name that public rows hide.
PLAIN_FIELDS = ("origin", "state", "status", "compiled", "correct", "speedup", "speedup_low", "speedup_high",
                "kernel_ms", "reference_ms", "kernel_timing", "reference_timing", "max_abs_diff", "max_rel_diff",
                "trials_passed", "trials_total", "flags", "notes", "error", "attempts", "failure_reason")  # fmt: skip
LIST_VALUES = ("id", "kernel", "kernel__run", "kernel__problem", "hardware__slug", *PLAIN_FIELDS,
               "queued_at", "started_at", "finished_at",
               "kernel__submitted_by", "kernel__run__created_by", "worker_name")  # fmt: skip


def evaluation_rows(request: Request, format: str | None) -> Callable[[dict], dict]:
    """Writes a values() row of LIST_VALUES as EvaluationSerializer writes the evaluation, for
    `request`'s user (tests/api/test_list_rows.py holds the two equal)."""
    url = row_urls(request, "api:evaluation-detail", format)
    when = datetime_texts()
    user = getattr(request, "user", None)

    def write(row: dict) -> dict:
        data = {"id": row["id"], "url": url(row["id"]), "kernel": row["kernel"], "run": row["kernel__run"],
                "problem": row["kernel__problem"], "hardware": row["hardware__slug"]}  # fmt: skip
        for name in PLAIN_FIELDS:
            data[name] = row[name]
        data["queued_at"] = when(row["queued_at"])
        data["started_at"] = when(row["started_at"])
        data["finished_at"] = when(row["finished_at"])
        data["withheld"] = []
        if reads_raw_output(user, row["kernel__submitted_by"], row["kernel__run__created_by"]):
            return data
        return disclosure.public_evaluation_data(data, row["worker_name"])

    return write


class ProgressSerializer(serializers.Serializer):
    """Where the evaluation stands (leaderboard.evaluations.progress.Progress)."""

    state = serializers.CharField()
    label = serializers.CharField()
    position = serializers.IntegerField(allow_null=True)
    queue = serializers.CharField()
    attempts = serializers.IntegerField()
    worker = serializers.CharField()
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)
    failure_reason = serializers.CharField()


class EvaluationDetailSerializer(EvaluationSerializer):
    # Detail only: a queued evaluation's place in line costs a query, which a list must not pay per row.
    progress = serializers.SerializerMethodField()

    class Meta(EvaluationSerializer.Meta):
        fields = [
            *EvaluationSerializer.Meta.fields,
            "progress",
            "log",
            "stage_seconds",
            "environment",
            "worker_name",
            "instruments",
        ]

    @extend_schema_field(ProgressSerializer)
    def get_progress(self, evaluation: Evaluation) -> dict:
        return lifecycle.progress(evaluation).as_dict()


@extend_schema(
    parameters=[
        query_param("kernel", int, "Kernel id."),
        query_param("run", int, "Run id."),
        query_param("hardware", description="Hardware slug."),
        query_param("state", enum=[v for v, _ in Evaluation.State.choices]),
        query_param("status", enum=[v for v, _ in Evaluation.Status.choices]),
        query_param("origin", enum=[v for v, _ in Origin.choices]),
    ]
)
class EvaluationViewSet(ReadOnly):
    """Evaluations of kernels, measured here or imported; the detail includes the log."""

    serializer_class = EvaluationSerializer
    detail_serializer_class = EvaluationDetailSerializer
    pagination_class = CachedCountPagination  # a million rows: the total is cached, not counted per page
    list_values = LIST_VALUES

    def row_writer(self) -> Callable[[dict], dict]:
        return evaluation_rows(self.request, self.format_kwarg)

    def get_queryset(self):
        evaluations = Evaluation.objects.order_by("-queued_at", "-pk")
        if self.action != "list":
            # kernel__run: who created the run may read the log (can_read_raw_output).
            return evaluations.select_related("hardware", "kernel__run")
        if (kernel := query_int(self.request, "kernel", low=1)) is not None:
            evaluations = evaluations.filter(kernel_id=kernel)
        if (run := query_int(self.request, "run", low=1)) is not None:
            evaluations = evaluations.filter(kernel__run_id=run)
        if slug := query_text(self.request, "hardware"):
            evaluations = evaluations.filter(hardware=Hardware.objects.resolve(slug))
        if state := query_choice(self.request, "state", Evaluation.State.choices):
            evaluations = evaluations.filter(state=state)
        if value := query_choice(self.request, "status", Evaluation.Status.choices):
            evaluations = evaluations.filter(status=value)
        if origin := query_choice(self.request, "origin", Origin.choices):
            evaluations = evaluations.filter(origin=origin)
        # No select_related or defer: the list reads only LIST_VALUES (list_values), and its count's
        # cache key (CachedCountPaginator) compiles this query, about 1.5 ms more with them.
        return evaluations
