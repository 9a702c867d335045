"""Scores labs and papers published, and the posts that launched models."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from leaderboard.models.names import Lab, LanguageModel


class ReportedScore(models.Model):
    """A number a lab or paper published. Always shown apart from scores measured here."""

    class Unit(models.TextChoices):
        PERCENT = "%", "percent"
        TIMES = "x", "times (speedup)"

    class DatePrecision(models.TextChoices):
        DAY = "day", "day"
        MONTH = "month", "month"

    model = models.ForeignKey(LanguageModel, on_delete=models.PROTECT, related_name="reported_scores")
    variant = models.CharField(max_length=200, help_text="As the source names it, e.g. 'KernelBench Hard'.")
    metric = models.CharField(max_length=60)
    value = models.FloatField()
    unit = models.CharField(max_length=1, choices=Unit.choices)
    setting = models.CharField(max_length=300, blank=True)
    hardware_name = models.CharField(max_length=120, blank=True)
    reported_on = models.DateField(help_text="For month-only dates, the first of the month.")
    date_precision = models.CharField(max_length=5, choices=DatePrecision.choices, default=DatePrecision.DAY)
    source_url = models.URLField(max_length=500)
    caveat = models.TextField(blank=True, help_text="Shown beside the score wherever it appears.")
    entered_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-reported_on", "model"]
        constraints = [
            models.UniqueConstraint(
                fields=["model", "variant", "metric", "setting", "source_url"], name="reportedscore_unique"
            ),
            models.CheckConstraint(
                condition=models.Q(unit="%", value__gte=0, value__lte=100) | models.Q(unit="x", value__gt=0),
                name="reportedscore_value_in_range",
            ),
        ]
        indexes = [models.Index(fields=["model", "-reported_on"], name="reportedscore_model_idx")]

    def __str__(self) -> str:
        return f"{self.model}: {self.variant} {self.metric} = {self.display_value}"

    @property
    def display_value(self) -> str:
        return f"{self.value:g}{self.unit}" if self.unit == "%" else f"{self.value:g}x"

    @property
    def display_date(self) -> str:
        if self.date_precision == self.DatePrecision.MONTH:
            return self.reported_on.strftime("%Y-%m")
        return self.reported_on.isoformat()


class LaunchPost(models.Model):
    """A lab's model launch post, and whether it lists KernelBench."""

    lab = models.ForeignKey(Lab, on_delete=models.PROTECT, related_name="launch_posts")
    model = models.ForeignKey(
        LanguageModel, on_delete=models.SET_NULL, null=True, blank=True, related_name="launch_posts"
    )
    title = models.CharField(max_length=300)
    url = models.URLField(max_length=500, unique=True)
    published_on = models.DateField()
    lists_kernelbench = models.BooleanField(default=False)
    kernelbench_score = models.CharField(max_length=200, blank=True, help_text="As the post states it.")
    is_demo = models.BooleanField(default=False, help_text="Synthetic row made by seed_demo.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-published_on"]
        indexes = [models.Index(fields=["lists_kernelbench", "-published_on"], name="launchpost_kb_idx")]

    def __str__(self) -> str:
        return f"{self.lab}: {self.title} ({self.published_on})"
