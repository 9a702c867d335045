"""Ingestion in the Django admin: CSV upload for reported scores and launch posts (the same parsers
as the API and the commands), the "re-evaluate every kernel" action on runs, and merging models."""

from __future__ import annotations

from collections.abc import Callable

from django import forms
from django.conf import settings
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.urls import path, reverse

from leaderboard.evaluations.quotas import QuotaExceeded
from leaderboard.ingest.model_names import MergeConflict, merge_models
from leaderboard.ingest.run_import import rescore_run, verify_run
from leaderboard.ingest.uploads import RowErrors, read_upload
from problems.models import ScoringRules


class CsvUploadForm(forms.Form):
    file = forms.FileField(help_text="UTF-8 CSV with a header row.")


class CsvUploadMixin:
    """Adds an "Upload CSV" page to a ModelAdmin. Subclasses set `csv_columns`, `csv_read(text, name)`
    (raises RowErrors) and `csv_store(rows, user)` (returns an ImportReport)."""

    change_list_template = "admin/leaderboard/change_list_with_upload.html"
    csv_columns: tuple[str, ...] = ()
    csv_read: Callable
    csv_store: Callable

    def get_urls(self):
        opts = self.model._meta
        view = self.admin_site.admin_view(self.upload_csv_view)
        extra = [path("upload-csv/", view, name=f"{opts.app_label}_{opts.model_name}_upload_csv")]
        return extra + super().get_urls()

    def upload_csv_view(self, request):
        if not self.has_add_permission(request):
            raise PermissionDenied
        form = CsvUploadForm(request.POST or None, request.FILES or None)
        errors: list[str] = []
        if request.method == "POST" and form.is_valid():
            upload = form.cleaned_data["file"]
            try:
                text = read_upload(upload, settings.API_TABLE_MAX_BYTES)
                rows = type(self).csv_read(text, upload.name)
            except RowErrors as exc:
                errors = exc.errors
            else:
                report = type(self).csv_store(rows, request.user)
                noun = self.model._meta.verbose_name_plural
                self.message_user(request, f"{upload.name}: " + report.summary(str(noun)), messages.SUCCESS)
                opts = self.model._meta
                return redirect(reverse(f"admin:{opts.app_label}_{opts.model_name}_changelist"))
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": f"Upload {self.model._meta.verbose_name_plural} (CSV)",
            "form": form,
            "errors": errors,
            "columns": self.csv_columns,
        }
        return TemplateResponse(request, "admin/leaderboard/csv_upload.html", context, status=400 if errors else 200)


@admin.action(description="Re-evaluate every kernel of the selected runs here", permissions=["verify"])
def verify_runs(modeladmin, request, queryset) -> None:
    total = waiting = 0
    for run in queryset.select_related("hardware"):
        try:
            queued, skipped = verify_run(run, by=request.user)
        except (PermissionDenied, QuotaExceeded) as exc:  # this run is left as it was; the others go on
            modeladmin.message_user(request, f"Run {run.pk}: {exc}", messages.ERROR)
            continue
        total += len(queued)
        waiting += skipped
    modeladmin.message_user(
        request, f"Queued {total} evaluations ({waiting} kernels already had one waiting).", messages.SUCCESS
    )


class RescoreForm(forms.Form):
    rules = forms.ModelChoiceField(
        ScoringRules.objects.all(), help_text="KernelBench's rules as one version defined them."
    )


@admin.action(
    description="Re-score the selected runs under other rules (earlier verdicts kept)", permissions=["verify"]
)
def rescore_runs(modeladmin, request, queryset):
    """Asks which rules on an intermediate page, then queues every kernel of the runs under them."""
    form = RescoreForm(request.POST if "rules" in request.POST else None)
    if not form.is_valid():
        context = {
            **modeladmin.admin_site.each_context(request),
            "opts": modeladmin.model._meta,
            "title": "Re-score runs under other rules",
            "form": form,
            "runs": queryset.select_related("rules"),
            "action": "rescore_runs",
        }
        return TemplateResponse(request, "admin/leaderboard/rescore_runs.html", context)
    rules = form.cleaned_data["rules"]
    total = waiting = 0
    for run in queryset.select_related("hardware"):
        try:
            queued, skipped = rescore_run(run, rules, by=request.user)
        except (PermissionDenied, QuotaExceeded) as exc:  # this run is left as it was; the others go on
            modeladmin.message_user(request, f"Run {run.pk}: {exc}", messages.ERROR)
            continue
        total += len(queued)
        waiting += skipped
    modeladmin.message_user(
        request,
        f"Runs now scored under {rules.name}: queued {total} evaluations ({waiting} kernels already had one "
        "waiting); earlier verdicts are kept.",
        messages.SUCCESS,
    )
    return None


class VerifyRunsMixin:
    actions = [verify_runs, rescore_runs]

    def has_verify_permission(self, request) -> bool:
        return request.user.has_perm("leaderboard.add_evaluation")


class MergeForm(forms.Form):
    keep = forms.ModelChoiceField(queryset=None, help_text="The record that stays; the others are merged into it.")

    def __init__(self, *args, models=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["keep"].queryset = models


# What a merge does (model_names.merge_models): deletes a model and duplicate reported scores,
# moves runs, reported scores, launch posts and aliases, adds aliases. A staff member may merge
# only with every one of these; with `change` on models alone the action is not offered.
MERGE_PERMISSIONS = tuple(
    f"leaderboard.{codename}"
    for codename in (
        "change_languagemodel", "delete_languagemodel", "change_run", "change_reportedscore",
        "delete_reportedscore", "change_launchpost", "change_modelalias", "add_modelalias",
    )
)  # fmt: skip


@admin.action(
    description="Merge the selected models into one (runs, scores, posts and aliases move)", permissions=["merge"]
)
def merge_selected_models(modeladmin, request, queryset):
    """Asks which model stays on an intermediate page, then merges the others into it
    (model_names.merge_models, which records who merged and when)."""
    form = MergeForm(request.POST if "keep" in request.POST else None, models=queryset)
    if queryset.count() < 2 or not form.is_valid():
        if queryset.count() < 2:
            modeladmin.message_user(request, "Select at least two models to merge.", messages.WARNING)
            return None
        context = {
            **modeladmin.admin_site.each_context(request), "opts": modeladmin.model._meta,
            "title": "Merge models", "form": form, "models": queryset, "action": "merge_selected_models",
        }  # fmt: skip
        return TemplateResponse(request, "admin/leaderboard/merge_models.html", context)
    keep = form.cleaned_data["keep"]
    for model in queryset.exclude(pk=keep.pk):
        try:
            merge = merge_models(model, keep, by=request.user)
        except MergeConflict as exc:  # this one is left as it was; the others go on
            modeladmin.message_user(request, str(exc), messages.ERROR)
            continue
        modeladmin.message_user(
            request, f"Merged {merge.merged_name} into {keep.name}: {merge.moved}", messages.SUCCESS
        )
    return None


class MergeModelsMixin:
    actions = [merge_selected_models]

    def has_merge_permission(self, request) -> bool:
        return request.user.has_perms(MERGE_PERMISSIONS)
