"""What the API shows of each row. List serializers leave out large text (sources, logs)."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from leaderboard.evaluations import progress as lifecycle
from leaderboard.ingest.submissions import SubmissionError, check_source, check_target
from leaderboard.models import Evaluation, Kernel, Lab, LanguageModel, LaunchPost, ReportedScore, Review, Run
from problems.models import Hardware, Problem, ProblemSet


class SlugField(serializers.SlugRelatedField):
    """A slug lookup that refuses, before querying, text that PostgreSQL would refuse (NUL)."""

    def to_internal_value(self, data):
        if isinstance(data, str) and ("\x00" in data or not data.isprintable()):
            self.fail("invalid")
        return super().to_internal_value(data)


class ProblemSetSerializer(serializers.ModelSerializer):
    problem_count = serializers.IntegerField(read_only=True)

    class Meta:
        model = ProblemSet
        fields = ["slug", "name", "version", "description", "source_url", "atol", "rtol", "problem_count", "created_at"]


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
    url = serializers.HyperlinkedIdentityField(view_name="api:problem-detail")

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


class RunSerializer(serializers.ModelSerializer):
    url = serializers.HyperlinkedIdentityField(view_name="api:run-detail")
    model = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    model_name = serializers.CharField(source="model.name", read_only=True)
    problem_set = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    hardware = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    kernel_count = serializers.IntegerField(read_only=True)

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
            "origin",
            "notes",
            "kernel_count",
            "created_at",
        ]


class EvaluationBriefSerializer(serializers.ModelSerializer):
    class Meta:
        model = Evaluation
        fields = ["id", "origin", "state", "status", "compiled", "correct", "speedup", "finished_at"]


class KernelSerializer(serializers.ModelSerializer):
    url = serializers.HyperlinkedIdentityField(view_name="api:kernel-detail")
    level = serializers.IntegerField(source="problem.level", read_only=True)
    problem_number = serializers.IntegerField(source="problem.number", read_only=True)
    problem_name = serializers.CharField(source="problem.name", read_only=True)
    model = serializers.SlugRelatedField(source="run.model", slug_field="slug", read_only=True)
    latest_evaluation = EvaluationBriefSerializer(read_only=True)

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
            "created_at",
        ]


class KernelDetailSerializer(KernelSerializer):
    evaluations = EvaluationBriefSerializer(
        many=True,
        read_only=True,
        help_text="Every evaluation, newest first: imported (unverified) and measured here side by side.",
    )

    class Meta(KernelSerializer.Meta):
        fields = [*KernelSerializer.Meta.fields, "evaluations", "source"]


class EvaluationSerializer(serializers.ModelSerializer):
    url = serializers.HyperlinkedIdentityField(view_name="api:evaluation-detail")
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
        ]


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
        fields = [*EvaluationSerializer.Meta.fields, "progress", "log", "stage_seconds", "environment", "worker_name"]

    @extend_schema_field(ProgressSerializer)
    def get_progress(self, evaluation: Evaluation) -> dict:
        return lifecycle.progress(evaluation).as_dict()


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


class ReviewSerializer(serializers.ModelSerializer):
    reviewer = serializers.CharField(source="reviewer.username", read_only=True)
    kernel = serializers.PrimaryKeyRelatedField(queryset=Kernel.objects.all())
    note = serializers.CharField(required=False, allow_blank=True, max_length=5000, default="")

    class Meta:
        model = Review
        fields = ["id", "kernel", "verdict", "note", "reviewer", "created_at"]
        read_only_fields = ["id", "reviewer", "created_at"]


# ---------------------------------------------------------------------------------------------
# Ingestion: request shapes (documented in the schema; the parsers in leaderboard/ validate).


class ReportedScoreRowSerializer(serializers.Serializer):
    """One row, with the columns of data/reported_scores.csv."""

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


class LaunchPostRowSerializer(serializers.Serializer):
    date = serializers.DateField()
    lab = serializers.CharField()
    model = serializers.CharField(required=False, allow_blank=True)
    title = serializers.CharField()
    url = serializers.URLField()
    lists_kernelbench = serializers.BooleanField(required=False)
    kernelbench_score = serializers.CharField(required=False, allow_blank=True)


class CsvUploadSerializer(serializers.Serializer):
    file = serializers.FileField(help_text="A CSV file with a header row.")


class ImportResultSerializer(serializers.Serializer):
    created = serializers.IntegerField()
    updated = serializers.IntegerField()
    unchanged = serializers.IntegerField()
    warnings = serializers.ListField(child=serializers.CharField())


class RowErrorsSerializer(serializers.Serializer):
    detail = serializers.CharField()
    errors = serializers.ListField(child=serializers.CharField())


class RunImportSerializer(serializers.Serializer):
    """How an uploaded run is described; the kernels come as a zip `file` or a JSON `kernels` map."""

    model = serializers.CharField(max_length=120, help_text="Matched case-insensitively, or created.")
    organization = serializers.CharField(max_length=120, required=False, allow_blank=True)
    hardware = SlugField(slug_field="slug", queryset=Hardware.objects.all())
    problem_set = SlugField(
        slug_field="slug",
        queryset=ProblemSet.objects.all(),
        required=False,
        help_text="Needed when more than one problem set exists.",
    )
    setting = serializers.CharField(max_length=120, required=False, default="one-shot")
    name = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")
    level = serializers.IntegerField(
        min_value=1,
        max_value=4,
        required=False,
        allow_null=True,
        help_text="The level that bare problem ids in eval_results refer to, when the kernels span levels.",
    )
    notes = serializers.CharField(required=False, allow_blank=True, default="")


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


class SubmissionSerializer(serializers.Serializer):
    problem = serializers.PrimaryKeyRelatedField(queryset=Problem.objects.select_related("problem_set"))
    source = serializers.CharField(trim_whitespace=False, help_text="Python source defining class ModelNew.")
    hardware = SlugField(
        slug_field="slug",
        queryset=Hardware.objects.all(),
        required=False,
        help_text="Where to evaluate; defaults to the run's hardware when a run is given.",
    )
    model = SlugField(slug_field="slug", queryset=LanguageModel.objects.all(), required=False)
    run = serializers.PrimaryKeyRelatedField(
        queryset=Run.objects.select_related("problem_set", "hardware", "model"), required=False
    )
    setting = serializers.CharField(max_length=120, required=False, default="submitted")

    def validate_source(self, source: str) -> str:
        try:
            check_source(source)
        except SubmissionError as exc:
            raise serializers.ValidationError(str(exc)) from None
        return source

    def validate(self, data: dict) -> dict:
        try:
            data["hardware"] = check_target(data["problem"], data.get("hardware"), data.get("model"), data.get("run"))
        except SubmissionError as exc:
            raise serializers.ValidationError({exc.field or "non_field_errors": str(exc)}) from None
        return data


class SubmissionResultSerializer(serializers.Serializer):
    id = serializers.IntegerField(help_text="The evaluation's id.")
    kernel = serializers.IntegerField()
    run = serializers.IntegerField()
    status = serializers.CharField(help_text="The evaluation's state: queued at first.")
    url = serializers.URLField(help_text="Poll this for the result.")
