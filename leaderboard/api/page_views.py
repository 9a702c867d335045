"""The form view behind the problem page's "submit a kernel" (URL name problem-submit)."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_http_methods

from leaderboard.api.forms import SubmissionForm
from leaderboard.ingest.submissions import submit_kernel as submit
from problems.models import Problem

SUBMIT_PERMISSION = "leaderboard.add_kernel"


def _problem_for_submitter(request, pk: int) -> Problem:
    if not request.user.has_perm(SUBMIT_PERMISSION):
        raise PermissionDenied("Submitting kernels needs the leaderboard.add_kernel permission.")
    return get_object_or_404(Problem.objects.select_related("problem_set"), pk=pk)


@login_required
@require_http_methods(["GET", "POST"])
def submit_kernel(request, pk: int):
    problem = _problem_for_submitter(request, pk)
    form = SubmissionForm(request.POST or None, request.FILES or None, problem=problem)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        evaluation = submit(
            problem=problem,
            source=data["source"],
            hardware=data["hardware"],
            model=data.get("model"),
            run=data.get("run"),
            user=request.user,
        )
        messages.success(request, f"Kernel {evaluation.kernel_id} saved; evaluation {evaluation.pk} is queued.")
        return redirect("kernel-detail", evaluation.kernel_id)
    status = 400 if request.method == "POST" else 200
    return render(request, "leaderboard/submit_kernel.html", {"problem": problem, "form": form}, status=status)
