"""The run page, /runs/<id>/: its problems and samples, verification progress (kept live by
static/js/run_progress.js polling the API's progress resource), its fast_p curve and scores, and
a comparison with another run. Reads live in leaderboard.reads.runs."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render

from leaderboard.boards import stored as board_stored
from leaderboard.models import Run
from leaderboard.reads import charts, kept_pages, page_signatures, published
from leaderboard.reads import runs as reads
from leaderboard.reviews.services import run_maker


def _other_run(request: HttpRequest, run: Run) -> Run | None:
    """The run named by ?compare=, when it exists and is not this one."""
    text = request.GET.get("compare", "")
    if not text.isdigit() or int(text) == run.pk:
        return None
    return reads.run_for_page(int(text)).first()


def _published(run: Run, scores) -> dict | None:
    """A run from a published leaderboard: its figures, and their fast_1 per level over the level's
    problems (unlisted ones failed), shown apart from the run's scores."""
    if not run.published_source:
        return None
    figures = published.run_figures(run)
    levels = [
        (score.level, published.published_fast_p([f for f in figures if f.level == score.level], score.n_problems, 1.0))
        for score in scores
    ]
    return {"figures": figures, "levels": levels, "label": figures[0].label if figures else "published"}


def run_detail(request: HttpRequest, pk: int) -> HttpResponse:
    """Kept for anonymous visitors while nothing on it changes (kept_pages.py): rendering a run of
    250 kernels took 30-40 ms at 13 M kernels. Not while it is being verified: it shows progress."""
    compared = request.GET.get("compare", "")
    runs = [pk, int(compared)] if compared.isdigit() and int(compared) != pk else [pk]
    signature_of = None if request.user.is_authenticated else lambda: page_signatures.runs(runs)
    return kept_pages.kept_page(request, signature_of, lambda visitor: _run_detail(visitor, pk), ("compare",))


def _run_detail(request: HttpRequest, pk: int) -> HttpResponse:
    run = get_object_or_404(reads.run_for_page(pk))
    board_stored.attach_measured([run])  # "verified here": the count every page reads
    lines = reads.run_problems(run)
    scores = reads.run_scores(run, lines)
    other = _other_run(request, run)
    comparison = reads.compare(lines, reads.run_problems(other)) if other else None
    progress = reads.run_progress(run)
    context = {
        "run": run,
        "lines": lines,
        "scores": scores,
        "progress": progress,
        "several_samples": any(len(line.samples) > 1 for line in lines),
        "comparable": reads.comparable_runs(run, other),
        "other": other,
        "comparison": comparison,
        "comparison_summary": reads.compare_summary(comparison) if comparison else None,
        "charts": {"fast_p": charts.run_fast_p_chart(scores)},
        "published": _published(run, scores),
        "maker": run_maker(request.user, run),  # a username only to staff, reviewers and the maker
    }
    return render(request, "leaderboard/run_detail.html", context)
