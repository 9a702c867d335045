"""Pages. Thin views: reads live in leaderboard.reads.queries (and leaderboard.reads.standings), figures in
leaderboard.reads.charts, the level table's columns in leaderboard.reads.level_table, diffs in leaderboard.reads.diffs."""

from __future__ import annotations

import math

from django.core.paginator import Page, Paginator
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render

from leaderboard.evaluations import progress as lifecycle
from leaderboard.models import Evaluation, LanguageModel, Origin
from leaderboard.reads import charts, level_table, queries
from leaderboard.reads.diffs import compute_diff, highlight_python
from leaderboard.reads.standings import fast_p_curves, level_standings
from problems.models import LEVELS, Problem, ProblemSet

PER_PAGE = 50
DEFAULT_PICKED_P = 1.2
MAX_P = 1000.0


def _page(request: HttpRequest, items, per_page: int = PER_PAGE, param: str = "page") -> Page:
    return Paginator(items, per_page).get_page(request.GET.get(param))


def _measured_points(rows):
    """(date, row) for the scores-over-time charts: a run's fast_1 at the day it was created."""
    return [(row.run.created_at, row) for row in rows]


# ---------------------------------------------------------------------------------------------


def overview(request: HttpRequest) -> HttpResponse:
    problem_set = queries.default_problem_set()
    measured = queries.measured_standings(problem_set)
    all_reported = list(queries.reported_scores())
    groups = queries.best_reported_by_variant(all_reported)
    shown_groups, hidden_groups = queries.overview_groups(groups)
    posts = queries.launch_posts()
    context = {
        "problem_sets": queries.problem_sets_with_counts(),
        "problem_set": problem_set,
        "strongest_measured": measured[0] if measured else None,
        "strongest_reported": queries.strongest_reported(groups),
        "last_model": queries.last_model_added(),
        "latest_post": queries.latest_kernelbench_post(),
        "variant_groups": shown_groups,
        "hidden_groups": hidden_groups,
        "charts": {
            "reported_percent": charts.reported_bars(shown_groups, "%"),
            "reported_speedup": charts.reported_bars(shown_groups, "x"),
            "over_time": charts.scores_over_time(all_reported, _measured_points(measured)),
            "launch_posts": charts.launch_timeline(posts),
        },
        "levels": LEVELS,
    }
    return render(request, "leaderboard/overview.html", context)


def reported_index(request: HttpRequest) -> HttpResponse:
    scores = queries.reported_scores().order_by("variant", "-value", "model__name")
    variant = request.GET.get("variant", "").strip()
    if variant:
        scores = scores.filter(variant=variant)
    return render(request, "leaderboard/reported_index.html", {"page": _page(request, scores), "variant": variant})


# ---------------------------------------------------------------------------------------------


def _parse_p(text: str | None) -> tuple[float | None, str]:
    if text is None or text.strip() == "":
        return DEFAULT_PICKED_P, ""
    try:
        p = float(text)
    except ValueError:
        return DEFAULT_PICKED_P, f"p must be a number; showing p = {DEFAULT_PICKED_P:g}."
    if not math.isfinite(p) or p < 0 or p > MAX_P:
        return DEFAULT_PICKED_P, f"p must lie between 0 and {MAX_P:g}; showing p = {DEFAULT_PICKED_P:g}."
    return p, ""


def levels_index(request: HttpRequest) -> HttpResponse:
    return redirect("level-board", level="all")


def level_board(request: HttpRequest, level: str) -> HttpResponse:
    if level != "all" and level not in {str(n) for n in LEVELS}:
        raise Http404("no such level")
    level_number = None if level == "all" else int(level)
    params = request.GET
    p, p_error = _parse_p(params.get("p"))
    problem_sets = queries.problem_sets_with_counts()
    problem_set = next((s for s in problem_sets if s.slug == params.get("set")), None)
    if problem_set is None:
        default = queries.default_problem_set()
        problem_set = next((s for s in problem_sets if default and s.pk == default.pk), None)
    hardware_list = queries.hardware_list()
    hardware = next((h for h in hardware_list if h.slug == params.get("hardware")), None)
    setting = params.get("setting") or None
    origin = params.get("origin") if params.get("origin") in Origin.values else None

    # Reviews (issue 7): ?exclusions=include shows the scores as they were before reviewers' exclusions.
    include_excluded = params.get("exclusions") == "include"
    rows = []
    if problem_set is not None:
        filters = {"hardware": hardware, "setting": setting, "origin": origin, "include_excluded": include_excluded}
        rows = level_standings(problem_set, level_number, p=p, **filters)
    # Ranked by fast_1 unless the visitor sorts by another column (a stable sort: ties keep the
    # standings' order).
    sort = params.get("sort") or "fast_1"
    descending = params.get("dir", "desc") != "asc"
    rows = queries.sort_rows(rows, sort, descending)
    page = _page(request, rows)
    shown = list(page.object_list)
    columns = level_table.columns_for(p)
    table = level_table.table_rows(shown, columns, first_rank=page.start_index() or 1)
    level_label = "all levels" if level_number is None else f"level {level_number}"
    set_name = problem_set.name if problem_set else ""

    export = params.get("export")
    if export == "csv":
        response = HttpResponse(
            level_table.to_csv(table, columns, level_label, set_name), content_type="text/csv; charset=utf-8"
        )
        response["Content-Disposition"] = f'attachment; filename="kernelbench-level-{level}.csv"'
        return response
    if export == "json":
        return JsonResponse(
            level_table.to_json(table, columns, level_label, set_name, p) | {"include_excluded": include_excluded}
        )

    context = {
        "level": level,
        "level_number": level_number,
        "level_label": level_label,
        "levels": LEVELS,
        "p": p,
        "p_text": params.get("p", "") if not p_error else "",
        "p_error": p_error,
        "problem_sets": problem_sets,
        "problem_set": problem_set,
        "hardware_list": hardware_list,
        "hardware": hardware,
        "settings": queries.run_settings(),
        "setting": setting or "",
        "origins": Origin.choices,
        "origin": origin or "",
        "columns": columns,
        "table": table,
        "page": page,
        "sort": sort,
        "descending": descending,
        "n_problems": (problem_set.total if level_number is None else problem_set.level_counts[level_number])
        if problem_set
        else 0,
        "charts": {"fast_p": charts.fast_p_chart(shown, fast_p_curves(shown), p)},
        "include_excluded": include_excluded,
    }
    return render(request, "leaderboard/level_board.html", context)


# ---------------------------------------------------------------------------------------------


def models_index(request: HttpRequest) -> HttpResponse:
    return render(request, "leaderboard/models_index.html", {"page": _page(request, queries.models_list())})


def model_detail(request: HttpRequest, slug: str) -> HttpResponse:
    model = get_object_or_404(LanguageModel.objects.select_related("lab"), slug=slug)
    page = _page(request, queries.model_runs(model), per_page=20)
    runs = list(page.object_list)
    scores = queries.model_level_scores(model, runs)
    reported = queries.model_reported_scores(model)
    measured = [(run.created_at, scores[run.pk]["all"]) for run in runs if "all" in scores.get(run.pk, {})]
    context = {
        "model": model,
        "page": page,
        "runs": [(run, scores.get(run.pk, {})) for run in runs],
        "level_keys": ["all", *[str(level) for level in LEVELS]],
        "reported_groups": queries.best_reported_by_variant(reported),
        "reported": reported,
        "charts": {"history": charts.model_history(reported, measured)},
    }
    return render(request, "leaderboard/model_detail.html", context)


# ---------------------------------------------------------------------------------------------


def problems_index(request: HttpRequest) -> HttpResponse:
    problem_sets = list(ProblemSet.objects.order_by("name"))
    problem_set = next((s for s in problem_sets if s.slug == request.GET.get("set")), None)
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
    problem = get_object_or_404(Problem.objects.select_related("problem_set"), pk=pk)
    context = {
        "problem": problem,
        "source_html": highlight_python(problem.source, anchor="ref"),
        "baselines": queries.problem_baselines(problem),
        "page": _page(request, queries.kernels_ranked(problem)),
        "charts": {"speedups": charts.speedup_bars(queries.problem_speedups(problem))},
    }
    return render(request, "leaderboard/problem_detail.html", context)


# ---------------------------------------------------------------------------------------------


def kernel_detail(request: HttpRequest, pk: int) -> HttpResponse:
    kernel = get_object_or_404(queries.kernel_for_page(pk))
    siblings = queries.sibling_kernels(kernel)
    against = _pick_against(request.GET.get("against"), siblings)
    view = "unified" if request.GET.get("view") == "unified" else "split"
    evaluation: Evaluation | None = kernel.latest_evaluation
    history = _page(request, queries.kernel_evaluations(kernel), per_page=20)
    progress = lifecycle.progress_many(history.object_list)
    for item in history.object_list:
        item.progress = progress[item.pk]
    pending = [item.progress for item in history.object_list if item.state in Evaluation.PENDING_STATES]
    if evaluation is None and history.object_list:
        evaluation = kernel.evaluations.select_related("hardware").first()
    context = {
        "kernel": kernel,
        "run": kernel.run,
        "problem": kernel.problem,
        "source_html": highlight_python(kernel.source, anchor="k"),
        "reference_diff": compute_diff(
            kernel.problem.source, kernel.source, "reference (class Model)", f"kernel {kernel.pk}"
        ),
        "siblings": siblings,
        "against": against,
        "against_diff": compute_diff(against.source, kernel.source, f"kernel {against.pk}", f"kernel {kernel.pk}")
        if against
        else None,
        "view": view,
        "evaluation": evaluation,
        "evaluation_demo": bool(
            evaluation and isinstance(evaluation.environment, dict) and evaluation.environment.get("demo")
        ),
        "history": history,
        "pending": pending,
        "charts": {"timing": charts.timing_distributions(evaluation)},
    }
    return render(request, "leaderboard/kernel_detail.html", context)


def _pick_against(requested: str | None, siblings):
    """The sibling kernel to diff against: the one asked for, else the fastest; its source is
    loaded alone (the list itself carries no sources)."""
    if not siblings:
        return None
    chosen = next((k for k in siblings if requested and str(k.pk) == requested), siblings[0])
    chosen.source = type(chosen).objects.values_list("source", flat=True).get(pk=chosen.pk)
    return chosen


# ---------------------------------------------------------------------------------------------


def search(request: HttpRequest) -> HttpResponse:
    text = request.GET.get("q", "").strip()[:100]
    models = problems = None
    if text:
        models = queries.search_models(text)[:PER_PAGE]
        problems = queries.search_problems(text)[:PER_PAGE]
    return render(request, "leaderboard/search.html", {"q": text, "models": models, "problems": problems})
