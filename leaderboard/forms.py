"""Forms of the pages: the problem page's "submit a kernel" (the same rules as POST /api/v1/submissions/)."""

from __future__ import annotations

from django import forms
from django.conf import settings

from leaderboard.ingest.submissions import SubmissionError, check_source, check_target
from leaderboard.ingest.uploads import RowErrors, decode_upload
from leaderboard.models import LanguageModel, Origin, Run
from problems.models import Hardware, Problem


class SubmissionForm(forms.Form):
    """`SubmissionForm(problem=..., user=...)` (its "one of your runs" lists that user's runs);
    post it to `{% url 'problem-submit' problem.pk %}`."""

    source = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 18, "spellcheck": "false", "class": "code"}),
        strip=False,
        required=False,
        help_text="Python defining class ModelNew.",
    )
    source_file = forms.FileField(required=False, help_text="Or upload the .py file.")
    hardware = forms.ModelChoiceField(queryset=Hardware.objects.order_by("slug"), to_field_name="slug", required=False)
    model = forms.ModelChoiceField(
        queryset=LanguageModel.objects.order_by("name"), to_field_name="slug", required=False
    )
    run = forms.ModelChoiceField(queryset=Run.objects.none(), required=False, help_text="Or add to one of your runs.")

    def __init__(self, *args, problem: Problem, user=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.problem = problem
        self.user = user
        # "One of your runs": only the runs this user made (writes into a run are its creator's).
        self.fields["run"].queryset = (
            Run.objects.created_by(user)
            .filter(problem_set=problem.problem_set_id, origin=Origin.MEASURED)
            .select_related("model", "hardware")
        )

    def clean(self) -> dict:
        data = super().clean()
        upload = data.get("source_file")
        if upload:
            limit = settings.KERNEL_SOURCE_MAX_BYTES
            if upload.size > limit:
                raise forms.ValidationError(f"The file is {upload.size} bytes; the limit is {limit} bytes.")
            try:
                data["source"] = decode_upload(upload.read(), upload.name)
            except RowErrors:
                raise forms.ValidationError("The file is not UTF-8 text.") from None
        try:
            check_source(data.get("source") or "")
            data["hardware"] = check_target(
                self.problem, data.get("hardware"), data.get("model"), data.get("run"), self.user
            )
        except SubmissionError as exc:
            if exc.field in self.fields:
                self.add_error(exc.field, str(exc))
            else:
                raise forms.ValidationError(str(exc)) from None
        return data
