"""Pages. Thin views: a view finds its object, calls one read of leaderboard.reads.pages (the boards:
leaderboard.reads.board.page) and renders its template."""

from __future__ import annotations

from datetime import datetime

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_http_methods

from leaderboard.evaluations.quotas import QuotaExceeded
from leaderboard.forms import SubmissionForm
from leaderboard.ingest.submissions import SUBMIT_PERMISSION, submit_kernel
from leaderboard.models import LanguageModel
from leaderboard.reads import kept_pages, page_signatures, pages, queries
from leaderboard.reads.board import page as board_page
from leaderboard.reads.board import params as board_params
from leaderboard.reads.board import served
from leaderboard.reads.board.featured import featured_problem_set
from leaderboard.reads.board.params import LEVEL_SLUGS
from leaderboard.reviews.services import can_read_raw_output
from problems.models import LEVELS, Problem, ProblemSet


def overview(request: HttpRequest) -> HttpResponse:
    board_params.keep_only(request, ())  # the overview reads no parameter: one cache entry
    problem_set = featured_problem_set()
    return served.cached_board(request, problem_set, lambda nobody, as_of: _overview(nobody, problem_set, as_of))


def _overview(request: HttpRequest, problem_set: ProblemSet | None, as_of: datetime) -> HttpResponse:
    return render(request, "leaderboard/overview.html", pages.overview(problem_set, as_of))


def reported_index(request: HttpRequest) -> HttpResponse:
    board_params.keep_only(request, ("variant", "page"))  # one kept build per variant and page
    return _kept(request, _reported)


def _reported(request: HttpRequest, as_of: datetime) -> HttpResponse:
    context = pages.reported(request.GET.get("variant", ""), request.GET.get("page"))
    return render(request, "leaderboard/reported_index.html", context)


def _kept(request: HttpRequest, render_page: served.PageBuild) -> HttpResponse:
    """A page that shows runs, models or problems of any set (their names, counts and scores: what
    the read model's versions move with), served as the boards are (served.py): from its last complete
    build, rebuilt off the request path once a write reaches any set. Rendering such a page each time
    cost 15-65 ms at 13 M kernels (a model's 20 runs with their scores, 400 models with their counts)."""
    return served.cached_board(request, served.EVERY_SET, render_page)


# ---------------------------------------------------------------------------------------------


def levels_index(request: HttpRequest) -> HttpResponse:
    return redirect("level-board", level="all")


def level_board(request: HttpRequest, level: str) -> HttpResponse:
    if level not in LEVEL_SLUGS:
        raise Http404("no such level")
    return board_page.level_board(request, level)


def level_grid(request: HttpRequest, level: str) -> HttpResponse:
    if level not in {str(n) for n in LEVELS}:
        raise Http404("no such level")
    return board_page.level_grid(request, int(level))


# ---------------------------------------------------------------------------------------------


def models_index(request: HttpRequest) -> HttpResponse:
    board_params.keep_only(request, ("page",))
    return _kept(request, _models)


def _models(request: HttpRequest, as_of: datetime) -> HttpResponse:
    return render(request, "leaderboard/models_index.html", pages.models(request.GET.get("page")))


def model_detail(request: HttpRequest, slug: str) -> HttpResponse:
    model, merged_into = pages.model_named(slug)
    if merged_into is not None:
        return redirect(merged_into, permanent=True)
    if model is None:
        raise Http404("no such model")
    board_params.keep_only(request, ("page",))  # one kept build per page of runs
    return _kept(request, lambda nobody, as_of: _model(nobody, model, as_of))


def _model(request: HttpRequest, model: LanguageModel, as_of: datetime) -> HttpResponse:
    context = pages.model(model, request.GET.get("page"), as_of)
    return render(request, "leaderboard/model_detail.html", context)


# ---------------------------------------------------------------------------------------------


def problems_index(request: HttpRequest) -> HttpResponse:
    board_params.keep_only(request, ("set", "level", "page"))
    return _kept(request, _problems)


def _problems(request: HttpRequest, as_of: datetime) -> HttpResponse:
    get = request.GET
    context = pages.problems(get.get("set", ""), get.get("level"), get.get("page"))
    return render(request, "leaderboard/problems_index.html", context)


def problem_detail(request: HttpRequest, pk: int) -> HttpResponse:
    """Served as the boards are (served.py): from its last complete build, rebuilt off the request
    path when a write reaches its problem set. Its checks and reference times count every kernel
    and evaluation of the problem, which grow with the data (1.3 s at 13 M evaluations)."""
    problem = get_object_or_404(pages.problem_with_set(pk))
    board_params.keep_only(request, ("page",))  # one kept build per page of kernels
    return served.cached_board(request, problem.problem_set, lambda nobody, as_of: _problem(nobody, problem, as_of))


def _problem(request: HttpRequest, problem: Problem, as_of: datetime) -> HttpResponse:
    context = pages.problem(problem, request.GET.get("page"), as_of)
    return render(request, "leaderboard/problem_detail.html", context)


def _problem_for_submitter(request: HttpRequest, pk: int) -> Problem:
    if not request.user.has_perm(SUBMIT_PERMISSION):
        raise PermissionDenied(f"Submitting kernels needs the {SUBMIT_PERMISSION} permission.")
    return get_object_or_404(pages.problem_with_set(pk))


@login_required
@require_http_methods(["GET", "POST"])
def problem_submit(request: HttpRequest, pk: int) -> HttpResponse:
    """The problem page's "submit a kernel": the form, and on a valid POST the kernel saved and queued."""
    problem = _problem_for_submitter(request, pk)
    form = SubmissionForm(request.POST or None, request.FILES or None, problem=problem, user=request.user)
    status = 400 if request.method == "POST" else 200
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            evaluation = submit_kernel(
                problem=problem,
                source=data["source"],
                hardware=data["hardware"],
                model=data.get("model"),
                run=data.get("run"),
                by=request.user,
            )
        except QuotaExceeded as exc:
            form.add_error(None, str(exc))
            status = exc.status
        else:
            messages.success(request, f"Kernel {evaluation.kernel_id} saved; evaluation {evaluation.pk} is queued.")
            return redirect("kernel-detail", evaluation.kernel_id)
    return render(request, "leaderboard/submit_kernel.html", {"problem": problem, "form": form}, status=status)


# ---------------------------------------------------------------------------------------------


def kernel_detail(request: HttpRequest, pk: int) -> HttpResponse:
    """Kept for anonymous visitors while nothing on it changes (kept_pages.py): rendering it took
    20-30 ms at 13 M kernels, most of it Python."""
    signature_of = None if request.user.is_authenticated else lambda: page_signatures.kernel(pk)
    return kept_pages.kept_page(
        request, signature_of, lambda visitor: _kernel(visitor, pk), ("against", "view", "page")
    )


def _kernel(request: HttpRequest, pk: int) -> HttpResponse:
    kernel = get_object_or_404(queries.kernel_for_page(pk))
    raw_output = can_read_raw_output(request.user, kernel)  # logs, errors, worker details
    return render(request, "leaderboard/kernel_detail.html", pages.kernel(kernel, request.GET, raw_output))


# ---------------------------------------------------------------------------------------------


def search(request: HttpRequest) -> HttpResponse:
    board_params.keep_only(request, ("q",))
    return _kept(request, _search)


def _search(request: HttpRequest, as_of: datetime) -> HttpResponse:
    context = pages.search(request.GET.get("q", "").strip()[:100])
    return render(request, "leaderboard/search.html", context)
