"""Runs: one model's kernels for a problem set on one hardware, with where their figures come from."""

from __future__ import annotations

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.urls import reverse

from leaderboard.models.names import LanguageModel
from problems.models import DB_INT_MAX, Hardware, ProblemSet, ScoringRules


class Origin(models.TextChoices):
    MEASURED = "measured", "measured here"
    IMPORTED = "imported", "imported, unverified"
    DEMO = "demo", "demo data (synthetic)"  # made by seed_demo; never a measurement


class RunQuerySet(models.QuerySet):
    def created_by(self, user) -> RunQuerySet:
        """The runs `user` made (the problem page's "one of your runs")."""
        return self.filter(created_by=user) if user is not None and user.is_authenticated else self.none()

    def for_leaderboard(self, problem_set: ProblemSet, hardware: Hardware | None = None) -> RunQuerySet:
        runs = self.filter(problem_set=problem_set).select_related("model__lab", "hardware", "problem_set")
        return runs.filter(hardware=hardware) if hardware else runs


class Precision(models.TextChoices):
    """KernelBench's `precision` option: the model and inputs are cast to it (tolerance 1e-4 for
    fp32, 1e-2 otherwise)."""

    FP32 = "fp32", "fp32"
    FP16 = "fp16", "fp16"
    BF16 = "bf16", "bf16"


class Run(models.Model):
    """One model attempting one problem set, in one setting, on one hardware."""

    model = models.ForeignKey(LanguageModel, on_delete=models.PROTECT, related_name="runs")
    problem_set = models.ForeignKey(ProblemSet, on_delete=models.PROTECT, related_name="runs")
    hardware = models.ForeignKey(Hardware, on_delete=models.PROTECT, related_name="runs")
    name = models.CharField(max_length=200, blank=True, help_text="Optional label, e.g. the run folder's name.")
    setting = models.CharField(max_length=120, default="one-shot", help_text="one-shot, best-of-k, agent, ...")
    turns = models.PositiveIntegerField(null=True, blank=True)
    samples_per_problem = models.PositiveIntegerField(
        default=1, validators=[MinValueValidator(1), MaxValueValidator(DB_INT_MAX)]
    )
    precision = models.CharField(
        max_length=4, choices=Precision.choices, default=Precision.FP32, help_text="Part of the run's setting."
    )
    origin = models.CharField(max_length=10, choices=Origin.choices, default=Origin.MEASURED)
    # The rules the run is scored under: its problem set's when it is made; changed only by a
    # re-score (ingest/run_import.rescore_run), which keeps the earlier evaluations.
    rules = models.ForeignKey(ScoringRules, on_delete=models.PROTECT, related_name="runs")
    notes = models.TextField(blank=True)
    # Set on a run imported from a leaderboard someone else published (import_kernelbench_leaderboard):
    # which one. Such a run holds only the kernels that leaderboard lists (its best correct ones),
    # so every problem it does not list counts as failed; pages say so wherever the run appears.
    published_source = models.CharField(
        max_length=200, blank=True, help_text="The published leaderboard this run's kernels come from, if any."
    )
    is_demo = models.BooleanField(default=False, help_text="Synthetic row made by seed_demo.")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    # Stored by the read model (leaderboard/boards/): lists never count kernels.
    n_kernels = models.PositiveIntegerField(default=0, editable=False)

    objects = RunQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]
        # Writes into a run (importing into it, adding kernels, verify) are its creator's, or of a
        # user with this permission (superusers have it). Run.writable_by says who may.
        permissions = [("write_any_run", "Can import into, add kernels to and verify any run")]
        constraints = [
            models.CheckConstraint(condition=models.Q(samples_per_problem__gte=1), name="run_samples_positive")
        ]
        indexes = [
            # Leaderboard: runs of one problem set, optionally on one hardware.
            models.Index(fields=["problem_set", "hardware"], name="run_leaderboard_idx"),
            # Newest first (the API's list), and of one set (a run page's "compare with" list): at
            # 50,000 runs a sort of every run took 44-76 ms a request.
            models.Index(fields=["-created_at", "-id"], name="run_newest_idx"),
            models.Index(fields=["problem_set", "-created_at", "-id"], name="run_set_newest_idx"),
            # A model's runs, newest first (its page): without it the page walked run_newest_idx past
            # every other model's runs (7,880 rows for model-0's first page at 50,000 runs).
            models.Index(fields=["model", "-created_at", "-id"], name="run_model_newest_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.model} · {self.setting} · {self.hardware.slug}"

    def save(self, *args, **kwargs) -> None:
        if self.rules_id is None:
            self.rules_id = self.problem_set.rules_id
        super().save(*args, **kwargs)

    def get_absolute_url(self) -> str:
        return reverse("run-detail", args=[self.pk])

    @property
    def rules_summary(self) -> str:
        """The rules it was scored under, as they apply on its hardware (no CUDA events on a CPU)."""
        return self.rules.summary_on(self.hardware.kind)

    def writable_by(self, user) -> bool:
        """Whether `user` may write into this run: its creator, or a holder of write_any_run.
        `None` is the server's own command line (import_run), which may."""
        if user is None:
            return True
        if not user.is_authenticated:
            return False
        return (self.created_by_id is not None and self.created_by_id == user.pk) or user.has_perm(WRITE_ANY_RUN)


WRITE_ANY_RUN = "leaderboard.write_any_run"
