"""Pages. Thin views: what a page shows is read in leaderboard.reads (queries; the boards, from
their parameters to their page or download, in leaderboard.reads.board; figures in charts; diffs in
diffs); a view picks those reads and renders its template."""

from __future__ import annotations

from datetime import datetime

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.core.paginator import Page, Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_http_methods

from leaderboard.boards import stored as board_stored
from leaderboard.evaluations.quotas import QuotaExceeded
from leaderboard.forms import SubmissionForm
from leaderboard.ingest.submissions import SUBMIT_PERMISSION, submit_kernel
from leaderboard.models import LanguageModel, ModelAlias, alias_key
from leaderboard.reads import charts, kernel_page, queries, repeats
from leaderboard.reads import overview as almanac
from leaderboard.reads.board import catalogue, served
from leaderboard.reads.board import page as board_page
from leaderboard.reads.board import params as board_params
from leaderboard.reads.board.featured import featured_problem_set
from leaderboard.reads.board.params import LEVEL_SLUGS
from leaderboard.reads.diffs import highlight_python
from leaderboard.reviews.services import can_read_raw_output
from problems.models import LEVELS, Problem, ProblemSet, named_by

PER_PAGE = 50


def _page(request: HttpRequest, items, per_page: int = PER_PAGE, param: str = "page") -> Page:
    return Paginator(items, per_page).get_page(request.GET.get(param))


def _measured_points(rows):
    """(date, row) for the scores-over-time charts: a run's fast_1 at the day it was created."""
    return [(row.run.created_at, row) for row in rows]


# ---------------------------------------------------------------------------------------------


def overview(request: HttpRequest) -> HttpResponse:
    board_params.keep_only(request, ())  # the overview reads no parameter: one cache entry
    problem_set = featured_problem_set()
    return served.cached_board(request, problem_set, lambda nobody, as_of: _overview(nobody, problem_set, as_of))


def _overview(request: HttpRequest, problem_set: ProblemSet | None, as_of: datetime) -> HttpResponse:
    leaders, measured = queries.overview_standings(problem_set)
    all_reported = list(queries.reported_scores())
    groups = queries.best_reported_by_variant(all_reported)
    shown_groups, hidden_groups = queries.overview_groups(groups)
    launch_chart = charts.launch_timeline(queries.launch_posts())
    context = {
        "problem_sets": catalogue.problem_sets_with_counts(),
        "problem_set": problem_set,
        "strongest_measured": leaders.measured,
        "strongest_published": leaders.published,
        "partly_measured": leaders.partly,
        "strongest_reported": queries.strongest_reported(groups),
        "last_model": queries.last_model_added(),
        "latest_post": queries.latest_kernelbench_post(),
        "variant_groups": shown_groups,
        "hidden_groups": hidden_groups,
        "charts": {
            "reported_percent": charts.reported_bars(shown_groups, "%"),
            "reported_speedup": charts.reported_bars(shown_groups, "x"),
            # Bounded (the page stays under 300 kB): the scores the page's variants show
            # and the best measured runs; /reported/ lists every score.
            "over_time": charts.scores_over_time(
                queries.shown_scores(shown_groups), _measured_points(measured[: queries.CHART_POINTS])
            ),
            "launch_posts": launch_chart,
        },
        "launch_marks": charts.marks_caption(launch_chart),  # read from the figure: what it draws
        "levels": LEVELS,
        "counts": almanac.counts(),
        "almanac": almanac.ALMANAC,  # release, the authors' words, version notes
        "as_of": as_of,
        "board_freshness": settings.BOARD_FRESHNESS_SECONDS,
    }
    return render(request, "leaderboard/overview.html", context)


def reported_index(request: HttpRequest) -> HttpResponse:
    scores = queries.reported_scores().order_by("variant", "-value", "model__name")
    variant = request.GET.get("variant", "").strip()
    if variant:
        scores = scores.filter(variant=variant)
    return render(request, "leaderboard/reported_index.html", {"page": _page(request, scores), "variant": variant})


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
    return render(request, "leaderboard/models_index.html", {"page": _page(request, queries.models_list())})


def model_detail(request: HttpRequest, slug: str) -> HttpResponse:
    model = LanguageModel.objects.select_related("lab").filter(slug=slug).first()
    if model is None:  # a merged model's slug lives on as an alias of the one it was merged into
        alias = ModelAlias.objects.select_related("model").filter(key=alias_key(slug)).first()
        if alias is None:
            raise Http404("no such model")
        return redirect(alias.model, permanent=True)
    page = _page(request, queries.model_runs(model), per_page=20)
    runs = list(page.object_list)
    scores = queries.model_level_scores(model, runs)
    reported = queries.model_reported_scores(model)
    rows = {run.pk: scores[run.pk]["all"] for run in runs if "all" in scores.get(run.pk, {})}
    measured, published = queries.model_history_points(runs, rows)
    context = {
        "model": model,
        "page": page,
        "runs": [(run, scores.get(run.pk, {})) for run in runs],
        "level_keys": ["all", *[str(level) for level in LEVELS]],
        "reported_groups": queries.best_reported_by_variant(reported),
        "reported": reported,
        "charts": {"history": charts.model_history(reported, measured, published)},
    }
    return render(request, "leaderboard/model_detail.html", context)


# ---------------------------------------------------------------------------------------------


def problems_index(request: HttpRequest) -> HttpResponse:
    problem_sets = list(ProblemSet.objects.order_by("name"))
    problem_set = named_by(problem_sets, request.GET.get("set", ""), ProblemSet.SLUG_LENGTH)
    level = request.GET.get("level")
    level_number = int(level) if level in {str(n) for n in LEVELS} else None
    problems = queries.problems_list(problem_set, level_number)
    context = {
        "page": _page(request, problems),
        "problem_sets": problem_sets,
        "problem_set": problem_set,
        "levels": LEVELS,
        "level": level_number,
    }
    return render(request, "leaderboard/problems_index.html", context)


def problem_detail(request: HttpRequest, pk: int) -> HttpResponse:
    """Served as the boards are (served.py): from its last complete build, rebuilt off the request
    path when a write reaches its problem set. Its checks and reference times count every kernel
    and evaluation of the problem, which grow with the data (1.3 s at 13 M evaluations)."""
    problem = get_object_or_404(Problem.objects.select_related("problem_set"), pk=pk)
    board_params.keep_only(request, ("page",))  # one kept build per page of kernels
    return served.cached_board(request, problem.problem_set, lambda nobody, as_of: _problem(nobody, problem, as_of))


def _problem(request: HttpRequest, problem: Problem, as_of: datetime) -> HttpResponse:
    page = _page(request, queries.kernels_ranked(problem))
    board_stored.attach_measured(kernel.run for kernel in page.object_list)  # "verified here" badges
    context = {
        "problem": problem,
        "source_html": highlight_python(problem.source, anchor="ref"),
        "baselines": queries.problem_baselines(problem),
        "reference_times": queries.problem_reference_times(problem),
        "checks": queries.problem_checks(problem),
        "page": page,
        "repeats": repeats.repeats_of([kernel.pk for kernel in page.object_list]),  # its marks "×2, 1.0%"
        "charts": {"speedups": charts.speedup_bars(queries.problem_speedups(problem))},
        "as_of": as_of,
        "board_freshness": settings.BOARD_FRESHNESS_SECONDS,
    }
    return render(request, "leaderboard/problem_detail.html", context)


def _problem_for_submitter(request: HttpRequest, pk: int) -> Problem:
    if not request.user.has_perm(SUBMIT_PERMISSION):
        raise PermissionDenied(f"Submitting kernels needs the {SUBMIT_PERMISSION} permission.")
    return get_object_or_404(Problem.objects.select_related("problem_set"), pk=pk)


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
                user=request.user,
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
    kernel = get_object_or_404(queries.kernel_for_page(pk))
    siblings = queries.sibling_kernels(kernel)
    against = kernel_page.pick_against(request.GET.get("against"), siblings)
    history = _page(request, queries.kernel_evaluations(kernel), per_page=20)
    raw_output = can_read_raw_output(request.user, kernel)  # logs, errors, worker details
    pending = kernel_page.attach_progress(history.object_list, raw_output)
    evaluation = kernel_page.described_evaluation(kernel, history.object_list)
    context = {
        "kernel": kernel,
        "run": kernel.run,
        "problem": kernel.problem,
        "source_html": highlight_python(kernel.source, anchor="k"),
        "reference_diff": kernel_page.reference_diff(kernel),
        "siblings": siblings,
        "against": against,
        "against_diff": kernel_page.against_diff(kernel, against),
        "view": "unified" if request.GET.get("view") == "unified" else "split",
        "evaluation": evaluation,
        "evaluation_demo": kernel_page.is_demo(evaluation),
        "measured_text": kernel_page.measured_text(evaluation),
        "raw_output": raw_output,
        "shown": kernel_page.shown_details(evaluation, raw_output),
        "history": history,
        "pending": pending,
        "charts": {"timing": charts.timing_distributions(evaluation)},
        "published_figures": kernel.published_figures.select_related("hardware"),
        "repeats": repeats.kernel_repeats(kernel.pk),
    }
    return render(request, "leaderboard/kernel_detail.html", context)


# ---------------------------------------------------------------------------------------------


def search(request: HttpRequest) -> HttpResponse:
    text = request.GET.get("q", "").strip()[:100]
    models = problems = None
    if text:
        models = queries.search_models(text)[:PER_PAGE]
        problems = queries.search_problems(text)[:PER_PAGE]
    return render(request, "leaderboard/search.html", {"q": text, "models": models, "problems": problems})
