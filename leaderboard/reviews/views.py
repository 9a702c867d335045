"""Reviewer pages: the review queue, the verdict and report forms of the kernel page, sign-in.

Thin views: rules live in leaderboard/reviews.py; access checks in the `_get_kernel_for_*` helpers.
"""

from __future__ import annotations

from urllib.parse import urlencode

from django import forms
from django.conf import settings
from django.contrib import messages
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from leaderboard.models import Kernel, KernelReport, LanguageModel, Review
from leaderboard.reviews import services as reviews
from problems.models import LEVELS

QUEUE_PAGE_SIZE = 25
NOTE_MAX_LENGTH = 5000


class VerdictForm(forms.Form):
    verdict = forms.ChoiceField(choices=Review.Verdict.choices)
    note = forms.CharField(required=False, max_length=NOTE_MAX_LENGTH, widget=forms.Textarea(attrs={"rows": 3}))


class ReportForm(forms.Form):
    reason = forms.CharField(
        max_length=KernelReport.REASON_MAX_LENGTH,
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
        self.fields["model"].choices = [("", "any")] + list(
            LanguageModel.objects.filter(runs__kernels__isnull=False)
            .distinct()
            .order_by("name")
            .values_list("slug", "name")
        )

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


def _get_kernel_for_reviewer(request: HttpRequest, pk: int) -> Kernel:
    """The kernel, for a user who may record verdicts; 404 when there is no such kernel, 403 otherwise."""
    kernel = get_object_or_404(Kernel.objects.select_related("run__hardware", "latest_evaluation__hardware"), pk=pk)
    if not reviews.can_review(request.user):
        raise PermissionDenied("Recording a verdict needs the reviewer role.")
    return kernel


def _get_kernel_for_reporter(request: HttpRequest, pk: int) -> Kernel:
    """The kernel, for a signed-in user (the view sends others to sign in first)."""
    kernel = get_object_or_404(Kernel, pk=pk)
    if not request.user.is_authenticated:
        raise PermissionDenied("Sign in to report a kernel.")
    return kernel


def _kernel_anchor(kernel: Kernel) -> str:
    return kernel.get_absolute_url() + "#review"


@login_required(login_url="review-sign-in")
def review_queue(request: HttpRequest) -> HttpResponse:
    if not reviews.can_review(request.user):
        raise PermissionDenied("The review queue is for reviewers.")
    form = QueueFilterForm(request.GET or None)
    filters = form.filters() if request.GET else reviews.QueueFilters()
    page = Paginator(reviews.review_queue(filters), QUEUE_PAGE_SIZE).get_page(request.GET.get("page"))
    context = {
        "form": form if request.GET else QueueFilterForm(),
        "filters": filters,
        "page": page,
        "sorts": reviews.QUEUE_SORTS,
        "threshold": settings.REVIEW_SPEEDUP_THRESHOLD,
        "flag_codes": dict(reviews.flag_choices()),
    }
    return render(request, "reviews/queue.html", context)


@require_POST
def review_kernel(request: HttpRequest, pk: int) -> HttpResponse:
    kernel = _get_kernel_for_reviewer(request, pk)
    form = VerdictForm(request.POST)
    if not form.is_valid():
        return render(
            request, "reviews/form_errors.html", {"kernel": kernel, "form": form, "what": "verdict"}, status=400
        )
    result = reviews.record_verdict(kernel, request.user, form.cleaned_data["verdict"], form.cleaned_data["note"])
    text = f"Verdict recorded: {result.review.get_verdict_display()}."
    if result.evaluation is not None:
        text += f" Evaluation {result.evaluation.pk} is queued on {result.evaluation.hardware.slug}."
    messages.success(request, text)
    return redirect(_kernel_anchor(kernel))


@require_POST
def report_kernel(request: HttpRequest, pk: int) -> HttpResponse:
    if not request.user.is_authenticated:
        kernel = get_object_or_404(Kernel, pk=pk)
        return redirect(f"{reverse('review-sign-in')}?{urlencode({'next': _kernel_anchor(kernel)})}")
    kernel = _get_kernel_for_reporter(request, pk)
    form = ReportForm(request.POST)
    if not form.is_valid():
        return render(
            request, "reviews/form_errors.html", {"kernel": kernel, "form": form, "what": "report"}, status=400
        )
    result = reviews.report_kernel(kernel, request.user, form.cleaned_data["reason"])
    if result.created:
        messages.success(request, "Thank you: the kernel is in the review queue.")
    else:
        messages.info(request, "You reported this kernel already; a reviewer will look at it.")
    return redirect(_kernel_anchor(kernel))


class SignInView(auth_views.LoginView):
    """Sign-in for visitors and reviewers (the admin's login takes staff only)."""

    template_name = "reviews/sign_in.html"
    redirect_authenticated_user = True
    next_page = "overview"  # when no ?next= is given (settings.LOGIN_REDIRECT_URL is the admin's)


class SignOutView(auth_views.LogoutView):
    next_page = "overview"
