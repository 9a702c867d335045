"""The reviewer workflow's forms: a verdict, a report, and the review queue's filters."""

from __future__ import annotations

from django import forms
from django.db.models import Exists, OuterRef
from django.utils.safestring import SafeString

from leaderboard.models import KernelReport, LanguageModel, Review, Run
from leaderboard.reads.options import text_options
from leaderboard.reviews import services as reviews
from problems.models import LEVELS
from problems.text import multi_line_text


class VerdictForm(forms.Form):
    verdict = forms.ChoiceField(choices=Review.Verdict.choices)
    note = forms.CharField(
        required=False,
        max_length=reviews.NOTE_MAX_LENGTH,
        validators=[multi_line_text],  # no ESC, BEL, DEL or C1 controls: they act on a reader's terminal
        widget=forms.Textarea(attrs={"rows": 3}),
    )


class ReportForm(forms.Form):
    reason = forms.CharField(
        max_length=KernelReport.REASON_MAX_LENGTH,
        validators=[multi_line_text],
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text="What looks wrong: a timing trick, a wrong result for other inputs, a copied reference...",
    )


class QueueFilterForm(forms.Form):
    flag = forms.ChoiceField(required=False)
    level = forms.TypedChoiceField(
        required=False, coerce=int, empty_value=None, choices=[("", "any")] + [(n, f"Level {n}") for n in LEVELS]
    )
    model = forms.ChoiceField(required=False)
    reason = forms.ChoiceField(required=False, choices=[("", "any")] + list(reviews.QUEUE_REASONS.items()))
    sort = forms.ChoiceField(required=False, choices=list(reviews.QUEUE_SORTS.items()))

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["flag"].choices = [("", "any")] + [(code, code) for code, _ in reviews.flag_choices()]
        # A probe of each model's runs (stored counts), not a join over every run: 45 ms at 50,000 runs.
        with_kernels = Run.objects.filter(model=OuterRef("pk"), n_kernels__gt=0)
        self.fields["model"].choices = [("", "any")] + list(
            LanguageModel.objects.filter(Exists(with_kernels)).order_by("name").values_list("slug", "name")
        )

    def options(self, filters: reviews.QueueFilters) -> dict[str, SafeString]:
        """Each filter's <option>s, the one in `filters` selected, made in Python (reads.options): the
        model list alone is hundreds of options, which a template loop took 20-30 ms to write."""
        chosen = {"flag": filters.flag, "level": filters.level, "model": filters.model, "reason": filters.reason}
        shown = {name: text_options(self.fields[name].choices, value) for name, value in chosen.items()}
        return shown | {"sort": text_options(reviews.QUEUE_SORTS.items(), filters.sort)}

    def filters(self) -> reviews.QueueFilters:
        """The filters asked for; a value that is not a choice is ignored (and shown as an error)."""
        self.is_valid()
        data = {name: self.cleaned_data.get(name) for name in self.fields if name not in self.errors}
        return reviews.QueueFilters(
            flag=data.get("flag") or None,
            level=data.get("level"),
            model=data.get("model") or None,
            reason=data.get("reason") or None,
            sort=data.get("sort") or "date",
        )
