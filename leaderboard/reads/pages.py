"""One read per page: what each page of leaderboard.views renders, assembled from the reads of this
package (queries, charts, diffs, repeats, the kernel page's parts), so that a view only finds its
object, calls one of these and renders. The boards' pages are leaderboard.reads.board.page."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.conf import settings
from django.core.paginator import Page, Paginator
from django.db.models import QuerySet

from leaderboard.boards import stored as board_stored
from leaderboard.models import Kernel, LanguageModel, ModelAlias, alias_key
from leaderboard.reads import charts, kernel_page, queries, repeats
from leaderboard.reads import overview as almanac
from leaderboard.reads.board import catalogue
from leaderboard.reads.diffs import highlight_python
from problems.models import LEVELS, Problem, ProblemSet, named_by

PER_PAGE = 50  # rows of a list page
MODEL_RUNS_PER_PAGE = 20
KERNEL_HISTORY_PER_PAGE = 20

Context = dict[str, Any]


def paged(items: Any, number: str | None, per_page: int = PER_PAGE) -> Page:
    """Page `number` (the query string's text; a bad one is the first or the last) of `items`."""
    return Paginator(items, per_page).get_page(number)


def overview(problem_set: ProblemSet | None, as_of: datetime) -> Context:
    """The overview (`/`): who leads the featured set, measured and published; the reported scores,
    their charts and the launch posts; the almanac."""
    leaders, measured = queries.overview_standings(problem_set)
    groups = queries.best_reported_by_variant(list(queries.reported_scores()))
    shown_groups, hidden_groups = queries.overview_groups(groups)
    launch_chart = charts.launch_timeline(queries.launch_posts())
    # Bounded (the page stays under 300 kB): the scores the page's variants show and the best
    # measured runs, a run's fast_1 at the day it was created; /reported/ lists every score.
    measured_points = [(row.run.created_at, row) for row in measured[: queries.CHART_POINTS]]
    return {
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
            "over_time": charts.scores_over_time(queries.shown_scores(shown_groups), measured_points),
            "launch_posts": launch_chart,
        },
        "launch_marks": charts.marks_caption(launch_chart),  # read from the figure: what it draws
        "levels": LEVELS,
        "counts": almanac.counts(),
        "almanac": almanac.ALMANAC,  # release, the authors' words, version notes
        "as_of": as_of,
        "board_freshness": settings.BOARD_FRESHNESS_SECONDS,
    }


def reported(variant: str, page: str | None) -> Context:
    """Every reported score, or those of one variant."""
    scores = queries.reported_scores().order_by("variant", "-value", "model__name")
    if variant:
        scores = scores.filter(variant=variant)
    return {"page": paged(scores, page), "variant": variant}


def models(page: str | None) -> Context:
    return {"page": paged(queries.models_list(), page)}


def model_named(slug: str) -> tuple[LanguageModel | None, LanguageModel | None]:
    """(the model of `slug`, None), or (None, the model it was merged into: a merged model's slug
    lives on as an alias), or (None, None)."""
    model = LanguageModel.objects.select_related("lab").filter(slug=slug).first()
    if model is not None:
        return model, None
    alias = ModelAlias.objects.select_related("model").filter(key=alias_key(slug)).first()
    return None, alias.model if alias else None


def model(model: LanguageModel, page: str | None, as_of: datetime) -> Context:
    """A model's page: its runs (a page of them) with each level's scores, its reported scores and
    the chart of both over time; its scores as of `as_of` (the page is kept as the boards are)."""
    runs_page = paged(queries.model_runs(model), page, MODEL_RUNS_PER_PAGE)
    runs = list(runs_page.object_list)
    scores = queries.model_level_scores(model, runs)
    reported_scores = queries.model_reported_scores(model)
    rows = {run.pk: scores[run.pk]["all"] for run in runs if "all" in scores.get(run.pk, {})}
    measured, published = queries.model_history_points(runs, rows)
    return {
        "model": model,
        "page": runs_page,
        "runs": [(run, scores.get(run.pk, {})) for run in runs],
        "level_keys": ["all", *[str(level) for level in LEVELS]],
        "reported_groups": queries.best_reported_by_variant(reported_scores),
        "reported": reported_scores,
        "charts": {"history": charts.model_history(reported_scores, measured, published)},
        "as_of": as_of,
        "board_freshness": settings.BOARD_FRESHNESS_SECONDS,
    }


def problems(set_name: str, level: str | None, page: str | None) -> Context:
    """The problems, of one set and level when named (an unknown name or level: all)."""
    problem_sets = list(ProblemSet.objects.order_by("name"))
    problem_set = named_by(problem_sets, set_name, ProblemSet.SLUG_LENGTH)
    level_number = int(level) if level in {str(n) for n in LEVELS} else None
    return {
        "page": paged(queries.problems_list(problem_set, level_number), page),
        "problem_sets": problem_sets,
        "problem_set": problem_set,
        "levels": LEVELS,
        "level": level_number,
    }


def problem_with_set(pk: int) -> QuerySet[Problem]:
    return Problem.objects.select_related("problem_set").filter(pk=pk)


def problem(problem: Problem, page: str | None, as_of: datetime) -> Context:
    """A problem's page: its reference, baselines, reference times, checks, and its kernels ranked
    (a page of them, each with its "verified here" badge and its repeat mark)."""
    kernels = paged(queries.kernels_ranked(problem), page)
    board_stored.attach_measured(kernel.run for kernel in kernels.object_list)  # "verified here" badges
    return {
        "problem": problem,
        "source_html": highlight_python(problem.source, anchor="ref"),
        "baselines": queries.problem_baselines(problem),
        "reference_times": queries.problem_reference_times(problem),
        "checks": queries.problem_checks(problem),
        "page": kernels,
        "repeats": repeats.repeats_of([kernel.pk for kernel in kernels.object_list]),  # "×2, 1.0%"
        "charts": {"speedups": charts.speedup_bars(queries.problem_speedups(problem))},
        "as_of": as_of,
        "board_freshness": settings.BOARD_FRESHNESS_SECONDS,
    }


def kernel(kernel: Kernel, query: Any, raw_output: bool) -> Context:
    """A kernel's page: its source and its diffs (against the reference and a sibling: `query`'s
    `against`, `view`), the evaluation it describes, its history (`page`) and its repeats.
    `raw_output`: whether the visitor may read logs, errors and worker details."""
    siblings = queries.sibling_kernels(kernel)
    against = kernel_page.pick_against(query.get("against"), siblings)
    history = paged(queries.kernel_evaluations(kernel), query.get("page"), KERNEL_HISTORY_PER_PAGE)
    pending = kernel_page.attach_progress(history.object_list, raw_output)
    evaluation = kernel_page.described_evaluation(kernel, history.object_list)
    return {
        "kernel": kernel,
        "run": kernel.run,
        "problem": kernel.problem,
        "source_html": highlight_python(kernel.source, anchor="k"),
        "reference_diff": kernel_page.reference_diff(kernel),
        "siblings": siblings,
        "sibling_options": kernel_page.sibling_options(siblings, against),
        "against": against,
        "against_diff": kernel_page.against_diff(kernel, against),
        "view": "unified" if query.get("view") == "unified" else "split",
        "evaluation": evaluation,
        "evaluation_demo": kernel_page.is_demo(evaluation),
        "measured_text": kernel_page.measured_text(evaluation),
        "gpu_time": kernel_page.gpu_time(evaluation),
        "raw_output": raw_output,
        "shown": kernel_page.shown_details(evaluation, raw_output),
        "history": history,
        "pending": pending,
        "charts": {"timing": charts.timing_distributions(evaluation)},
        "published_figures": kernel.published_figures.select_related("hardware"),
        "repeats": repeats.kernel_repeats(kernel.pk),
    }


def search(text: str) -> Context:
    """Models and problems whose names hold `text` (at most PER_PAGE of each); nothing for no text."""
    found = {"q": text, "models": None, "problems": None}
    if text:
        found["models"] = queries.search_models(text)[:PER_PAGE]
        found["problems"] = queries.search_problems(text)[:PER_PAGE]
    return found
