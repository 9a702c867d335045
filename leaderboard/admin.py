from django.contrib import admin
from django.core.exceptions import ValidationError
from django.db import models
from django.forms.models import BaseInlineFormSet

from leaderboard.ingest import launch_posts, reported_scores
from leaderboard.ingest.admin_actions import CsvUploadMixin, MergeModelsMixin, VerifyRunsMixin
from leaderboard.models import (
    BoardVersion,
    DirtyProblem,
    DirtyRun,
    Evaluation,
    Kernel,
    KernelReport,
    Lab,
    LanguageModel,
    LaunchPost,
    ModelAlias,
    ModelMerge,
    ProblemStats,
    PublishedFigure,
    ReportedScore,
    Review,
    Run,
    RunScore,
    WriteRecord,
    alias_key,
)
from leaderboard.reviews.services import record_verdict
from problems import admin as problems_admin
from problems.text import PLAIN_TEXT_FIELDS, multi_line_text


class ReadOnlyAdmin(admin.ModelAdmin):
    """Rows shown to look at, never added, edited or deleted by hand: records the writes keep
    (who wrote what, merges) and the boards' derived read model."""

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


class RecordedAdmin(admin.ModelAdmin):
    """An admin whose edit forms (add, change, delete) are Django's own write of one row: each edit
    is recorded with its user in WriteRecord, beside Django's LogEntry, so that every write a person
    makes is found in one place. Custom pages and actions call the services, which record their own."""

    def log_addition(self, request, obj, message):
        WriteRecord.objects.note(request.user, "admin_add", obj, summary=str(message))
        return super().log_addition(request, obj, message)

    def log_change(self, request, obj, message):
        WriteRecord.objects.note(request.user, "admin_change", obj, summary=str(message))
        return super().log_change(request, obj, message)

    def log_deletions(self, request, queryset):
        for obj in queryset:  # called before the rows go: their ids and names are still there
            WriteRecord.objects.note(request.user, "admin_delete", obj, summary=str(obj))
        return super().log_deletions(request, queryset)


def _record_problems_edits() -> None:
    """problems/ lies below the record of writes (its layer cannot import WriteRecord), so its admins
    (problem sets, rules, problems, hardware, baselines), registered by problems.admin, are
    registered again here with RecordedAdmin before them: their edits are recorded like the rest."""
    for model in problems_admin.RECORDED_MODELS:
        original = type(admin.site.get_model_admin(model))
        admin.site.unregister(model)
        admin.site.register(model, type(original.__name__, (RecordedAdmin, original), {}))


_record_problems_edits()


@admin.register(WriteRecord)
class WriteRecordAdmin(ReadOnlyAdmin):
    """Who wrote what, recorded by the writes themselves: read only."""

    list_display = ["created_at", "by_name", "action", "target_type", "target_id", "target_label", "summary"]
    list_filter = ["action", "target_type"]
    search_fields = ["by_name", "target_label", "summary"]
    date_hierarchy = "created_at"


@admin.register(Lab)
class LabAdmin(RecordedAdmin):
    formfield_overrides = PLAIN_TEXT_FIELDS  # no control characters in names and settings
    list_display = ["name", "slug", "website", "is_demo"]
    list_filter = ["is_demo"]
    search_fields = ["name"]
    prepopulated_fields = {"slug": ["name"]}


class ModelAliasFormSet(BaseInlineFormSet):
    """Each alias row is checked by ModelAlias.clean (the rule importers follow); this adds that two
    rows of one form may not store the same alias (its key is unique)."""

    def clean(self) -> None:
        super().clean()
        keys = [
            alias_key(form.cleaned_data.get("alias", ""))
            for form in self.forms
            if form.cleaned_data and not form.cleaned_data.get("DELETE")
        ]
        if len(keys) != len(set(keys)):
            raise ValidationError("The same alias is given twice.")


class ModelAliasInline(admin.TabularInline):
    model = ModelAlias
    formset = ModelAliasFormSet
    fields = ["alias", "source", "created_at"]
    readonly_fields = ["created_at"]
    formfield_overrides = PLAIN_TEXT_FIELDS
    extra = 1


@admin.register(LanguageModel)
class LanguageModelAdmin(MergeModelsMixin, RecordedAdmin):
    formfield_overrides = PLAIN_TEXT_FIELDS  # no control characters in names and settings
    list_display = ["name", "lab", "release_date", "open_weights", "is_demo", "added_at"]
    list_filter = ["lab", "open_weights", "is_demo"]
    search_fields = ["name", "lab__name", "aliases__key"]
    prepopulated_fields = {"slug": ["name"]}
    list_select_related = ["lab"]
    inlines = [ModelAliasInline]


@admin.register(ModelAlias)
class ModelAliasAdmin(RecordedAdmin):
    formfield_overrides = PLAIN_TEXT_FIELDS
    list_display = ["alias", "model", "source", "created_at"]
    search_fields = ["key", "model__name", "source"]
    list_select_related = ["model"]
    raw_id_fields = ["model"]


@admin.register(ModelMerge)
class ModelMergeAdmin(ReadOnlyAdmin):
    """The audit trail of merges: recorded by the merge, never edited."""

    list_display = ["merged_name", "into", "merged_by_name", "merged_at"]
    search_fields = ["merged_name", "merged_slug", "into__name"]
    readonly_fields = ["merged_name", "merged_slug", "into", "moved", "merged_by", "merged_by_name", "merged_at"]


@admin.register(PublishedFigure)
class PublishedFigureAdmin(RecordedAdmin):
    formfield_overrides = PLAIN_TEXT_FIELDS
    list_display = [
        "kernel",
        "hardware",
        "correct",
        "speedup_eager",
        "speedup_compile",
        "runtime_ms",
        "ranked_by_source",
        "source",
    ]
    list_filter = ["hardware", "ranked_by_source", "source", "kernel__problem__level"]
    search_fields = ["kernel__source_hash", "kernel__run__model__name", "source"]
    list_select_related = ["kernel__problem", "hardware"]
    raw_id_fields = ["kernel"]


@admin.register(Run)
class RunAdmin(VerifyRunsMixin, RecordedAdmin):
    formfield_overrides = PLAIN_TEXT_FIELDS  # no control characters in names and settings
    list_display = ["__str__", "model", "problem_set", "hardware", "setting", "origin", "is_demo", "created_at"]
    list_filter = ["origin", "hardware", "problem_set", "setting", "is_demo", "published_source"]
    search_fields = ["name", "model__name", "setting", "notes"]
    list_select_related = ["model", "problem_set", "hardware"]
    date_hierarchy = "created_at"


class EvaluationInline(admin.TabularInline):
    model = Evaluation
    fields = ["state", "status", "speedup", "hardware", "origin", "queued_at", "finished_at"]
    readonly_fields = fields
    extra = 0
    can_delete = False
    show_change_link = True


@admin.register(Kernel)
class KernelAdmin(RecordedAdmin):
    list_display = ["id", "problem", "run", "sample_index", "backend", "latest_status", "latest_speedup", "created_at"]
    list_filter = ["backend", "problem__level", "run__hardware", "run__origin"]
    search_fields = ["problem__name", "run__model__name", "source_hash"]
    list_select_related = ["problem", "run__model", "run__hardware", "latest_evaluation"]
    raw_id_fields = ["run", "problem", "latest_evaluation", "submitted_by"]
    readonly_fields = ["source_hash", "created_at"]
    inlines = [EvaluationInline]  # its published figures: PublishedFigureAdmin, filtered by kernel

    def get_readonly_fields(self, request, obj=None) -> list[str]:
        # A stored kernel's source never changes (new source, new kernel; Kernel.save refuses it).
        fixed = ["source", "run", "problem", "sample_index"] if obj is not None else []
        return [*fixed, *self.readonly_fields]

    @admin.display(description="status")
    def latest_status(self, obj: Kernel) -> str:
        return obj.latest_evaluation.status if obj.latest_evaluation else "-"

    @admin.display(description="speedup")
    def latest_speedup(self, obj: Kernel) -> str:
        speedup = obj.latest_evaluation.speedup if obj.latest_evaluation else None
        return f"{speedup:.2f}x" if speedup else "-"


@admin.register(Evaluation)
class EvaluationAdmin(RecordedAdmin):
    list_display = [
        "id",
        "kernel",
        "hardware",
        "origin",
        "state",
        "status",
        "speedup",
        "attempts",
        "worker_name",
        "queued_at",
    ]
    list_filter = ["state", "status", "origin", "instruments_state", "hardware"]
    search_fields = ["kernel__problem__name", "worker_name", "job_id", "error"]
    list_select_related = ["kernel__problem", "hardware"]
    raw_id_fields = ["kernel"]
    date_hierarchy = "queued_at"


@admin.register(ReportedScore)
class ReportedScoreAdmin(CsvUploadMixin, RecordedAdmin):
    csv_columns = reported_scores.COLUMNS
    csv_read = staticmethod(reported_scores.read_csv)
    csv_store = staticmethod(lambda rows, user: reported_scores.store_rows(rows, by=user))
    list_display = [
        "model",
        "variant",
        "metric",
        "display_value",
        "setting",
        "hardware_name",
        "display_date",
        "source_url",
    ]
    list_filter = ["metric", "unit", "model__lab"]
    search_fields = ["model__name", "variant", "setting", "source_url"]
    list_select_related = ["model"]
    date_hierarchy = "reported_on"


@admin.register(LaunchPost)
class LaunchPostAdmin(CsvUploadMixin, RecordedAdmin):
    csv_columns = launch_posts.COLUMNS
    csv_read = staticmethod(launch_posts.read_csv)
    csv_store = staticmethod(lambda rows, user: launch_posts.store_rows(rows, by=user))
    list_display = ["title", "lab", "model", "published_on", "lists_kernelbench", "kernelbench_score", "is_demo"]
    list_filter = ["lists_kernelbench", "lab", "is_demo"]
    search_fields = ["title", "url", "model__name", "lab__name"]
    list_select_related = ["lab", "model"]
    date_hierarchy = "published_on"


@admin.register(Review)
class ReviewAdmin(admin.ModelAdmin):
    """Append-only: a verdict is never edited or deleted (it is the audit trail). New verdicts go
    through leaderboard.reviews.services.record_verdict, so "needs rerun" queues an evaluation here too."""

    list_display = ["kernel", "verdict", "reviewer", "created_at"]
    list_filter = ["verdict"]
    search_fields = ["note", "reviewer__username"]
    list_select_related = ["kernel", "reviewer"]
    raw_id_fields = ["kernel"]
    fields = ["kernel", "verdict", "note"]
    formfield_overrides = {models.TextField: {"validators": [multi_line_text]}}  # no ESC, BEL, DEL, C1

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False

    def save_model(self, request, obj: Review, form, change: bool) -> None:
        review = record_verdict(obj.kernel, obj.verdict, obj.note, by=request.user).review
        obj.pk, obj.reviewer, obj.created_at = review.pk, review.reviewer, review.created_at
        obj._state.adding, obj._state.db = False, review._state.db


@admin.register(KernelReport)
class KernelReportAdmin(RecordedAdmin):
    """Visitors' reports, read-only here: a reviewer answers one by recording a verdict."""

    list_display = ["kernel", "reporter", "created_at"]
    search_fields = ["reason", "reporter__username"]
    list_select_related = ["kernel", "reporter"]
    raw_id_fields = ["kernel"]
    readonly_fields = ["kernel", "reporter", "reason", "created_at"]

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False


class DerivedAdmin(ReadOnlyAdmin):
    """The boards' read model: derived from kernels, evaluations and reviews, kept current by the
    writes that change them and rebuilt by `manage.py rebuild_boards`. Shown to look at, never edited
    by hand (an edit would make the boards disagree with their inputs)."""


@admin.register(RunScore)
class RunScoreAdmin(DerivedAdmin):
    list_display = ["run", "level", "with_excluded", "kernels", "s0_correct", "best_correct", "updated_at"]
    list_filter = ["level", "with_excluded"]
    list_select_related = ["run__model", "run__hardware"]
    exclude = ["s0_speedups", "best_speedups"]  # packed float64: unreadable as text


@admin.register(BoardVersion)
class BoardVersionAdmin(DerivedAdmin):
    list_display = ["problem_set", "version", "updated_at"]


@admin.register(DirtyRun)
class DirtyRunAdmin(DerivedAdmin):
    """Runs waiting for re-scoring, and runs set aside because they fail to score (with the error:
    fix the row it names, e.g. delete the evaluation, and the write re-scores the run)."""

    list_display = ["run_id", "marked_at", "whole", "failed_at", "error"]
    list_filter = [("failed_at", admin.EmptyFieldListFilter), "whole"]


@admin.register(DirtyProblem)
class DirtyProblemAdmin(DerivedAdmin):
    """The problems of marked runs to re-score (a run's other problems keep their stored entries)."""

    list_display = ["run_id", "problem_id", "last_marked_at"]


@admin.register(ProblemStats)
class ProblemStatsAdmin(DerivedAdmin):
    list_display = ["problem", "n_kernels"]
    list_select_related = ["problem"]
