"""Reviewer pages: the review queue, the verdict and report forms of the kernel page, sign-in.

Thin views: rules live in leaderboard.reviews.services, forms in leaderboard.reviews.forms; access
checks in the `_get_kernel_for_*` helpers.
"""

from __future__ import annotations

from urllib.parse import urlencode

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from leaderboard.models import Kernel
from leaderboard.ops import sign_in_limit
from leaderboard.reads import kept_pages, page_signatures
from leaderboard.reads.counts import CachedCountPaginator
from leaderboard.reviews import services as reviews
from leaderboard.reviews.forms import QueueFilterForm, ReportForm, VerdictForm

QUEUE_PAGE_SIZE = 25


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
def queue_page(request: HttpRequest) -> HttpResponse:
    if not reviews.can_review(request.user):
        raise PermissionDenied("The review queue is for reviewers.")
    # The same for every reviewer but the header's visitor parts: kept while no write reaches the
    # stored review states and figures it lists (kept_pages.py); rendering took 35 ms at 13 M.
    return kept_pages.kept_page(request, page_signatures.boards, _queue_page)


def _queue_page(request: HttpRequest) -> HttpResponse:
    form = QueueFilterForm(request.GET or None)
    filters = form.filters() if request.GET else reviews.QueueFilters()
    # The total is counted once a minute (the rows are live): 0.1 s at 200,000 kernels waiting.
    rows = CachedCountPaginator(
        reviews.review_queue(filters), QUEUE_PAGE_SIZE, count_key=reviews.queue_count_key(filters)
    )
    page = rows.get_page(request.GET.get("page"))
    for kernel in page.object_list:  # the instruments' figures of each row (the queue sorts by them)
        kernel.figures = reviews.queue_figures(kernel)
    context = {
        "form": form,
        "options": form.options(filters),
        "filters": filters,
        "page": page,
        "threshold": settings.REVIEW_SPEEDUP_THRESHOLD,
        "published_threshold": settings.REVIEW_PUBLISHED_SPEEDUP_THRESHOLD,
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
    result = reviews.record_verdict(kernel, form.cleaned_data["verdict"], form.cleaned_data["note"], by=request.user)
    text = f"Verdict recorded: {result.review.get_verdict_display()}."
    if result.evaluation is not None:
        text += f" Evaluation {result.evaluation.pk} is queued on {result.evaluation.hardware.slug}."
    messages.success(request, text)
    return redirect(_kernel_anchor(kernel))


@require_POST
def post_report(request: HttpRequest, pk: int) -> HttpResponse:
    if not request.user.is_authenticated:
        kernel = get_object_or_404(Kernel, pk=pk)
        return redirect(f"{reverse('review-sign-in')}?{urlencode({'next': _kernel_anchor(kernel)})}")
    kernel = _get_kernel_for_reporter(request, pk)
    form = ReportForm(request.POST)
    if not form.is_valid():
        return render(
            request, "reviews/form_errors.html", {"kernel": kernel, "form": form, "what": "report"}, status=400
        )
    result = reviews.report_kernel(kernel, form.cleaned_data["reason"], by=request.user)
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

    def form_invalid(self, form):
        # A locked username gets a 429 that says so (the form itself says only "did not match").
        username = form.data.get("username", "")
        if sign_in_limit.is_locked(username, self.request):
            context = self.get_context_data(form=form, locked=sign_in_limit.locked_message(username))
            return self.render_to_response(context, status=429)
        return super().form_invalid(form)


class SignOutView(auth_views.LogoutView):
    next_page = "overview"
