from django.contrib import admin
from django.db.models import Count

from problems.models import Baseline, Hardware, Problem, ProblemSet, ScoringRules
from problems.text import PLAIN_TEXT_FIELDS


@admin.register(ProblemSet)
class ProblemSetAdmin(admin.ModelAdmin):
    list_display = ["name", "slug", "version", "problem_total", "rules", "created_at"]
    search_fields = ["name", "slug", "version"]
    prepopulated_fields = {"slug": ["name"]}
    list_select_related = ["rules"]

    def get_queryset(self, request):
        return super().get_queryset(request).annotate(problem_total=Count("problems"))

    @admin.display(description="problems", ordering="problem_total")
    def problem_total(self, obj: ProblemSet) -> int:
        return obj.problem_total


@admin.register(ScoringRules)
class ScoringRulesAdmin(admin.ModelAdmin):
    """KernelBench's rules per version. A preset is best left as KernelBench defined it: add a new
    rule set instead of editing one that runs were scored under."""

    list_display = ["name", "slug", "kernelbench_version", "fp32_tolerance", "fp16_tolerance", "bf16_tolerance",
                    "correctness_trials", "timing_method"]  # fmt: skip
    search_fields = ["name", "slug", "kernelbench_version"]
    prepopulated_fields = {"slug": ["name"]}


@admin.register(Problem)
class ProblemAdmin(admin.ModelAdmin):
    list_display = ["name", "problem_set", "level", "number", "tags", "updated_at"]
    list_filter = ["problem_set", "level"]
    search_fields = ["name", "tags"]
    readonly_fields = ["source_hash", "created_at", "updated_at"]
    list_select_related = ["problem_set"]
    ordering = ["problem_set", "level", "number"]


@admin.register(Hardware)
class HardwareAdmin(admin.ModelAdmin):
    formfield_overrides = PLAIN_TEXT_FIELDS  # no control characters in names
    list_display = [
        "slug",
        "name",
        "kind",
        "device_name",
        "driver_version",
        "cuda_version",
        "torch_version",
        "last_seen_at",
    ]
    list_filter = ["kind"]
    search_fields = ["slug", "name", "device_name"]


@admin.register(Baseline)
class BaselineAdmin(admin.ModelAdmin):
    list_display = ["problem", "hardware", "mode", "compile_variant", "mean_ms", "std_ms", "num_trials", "origin"]
    list_filter = ["hardware", "mode", "origin", "problem__problem_set", "problem__level"]
    search_fields = ["problem__name", "source_file", "device_name"]
    list_select_related = ["problem", "hardware"]
    raw_id_fields = ["problem"]


#: The models edited here: leaderboard/admin.py (above the record of writes) has their edits recorded.
RECORDED_MODELS = (ProblemSet, ScoringRules, Problem, Hardware, Baseline)
