"""Reads behind the pages: each function costs a fixed number of queries, whatever the number of
rows (select_related / prefetch / one aggregate), so views stay thin and page cost stays flat."""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from dataclasses import dataclass, field, replace

from django.core.cache import cache
from django.db.models import Avg, Case, Count, F, Max, Min, OuterRef, Q, QuerySet, Subquery, Value, When
from django.db.models.functions import Coalesce

from leaderboard.boards import stored as board_stored
from leaderboard.boards.scoring import RULE_SAMPLE0, LevelScore
from leaderboard.models import (
    FASTEST,
    RANKED,
    Evaluation,
    Kernel,
    LanguageModel,
    LaunchPost,
    Origin,
    ReportedScore,
    Run,
    code_q,
)
from leaderboard.reads.board.choices import BoardFilters
from leaderboard.reads.board.ranked import ranked_standings
from leaderboard.reads.board.rows import (
    PUBLISHED,
    Leaders,
    ListedRows,
    StandingRow,
    Standings,
    board_runs,
    level_standings,
    make_row,
)
from problems.models import LEVELS, Baseline, Problem, ProblemSet

# Reported scores: the overview is compact: the best few models of each of the
# variants compared most, in its chart and its table; /reported/ lists all.
OVERVIEW_PER_VARIANT = 3
OVERVIEW_VARIANTS = 8
# Charts carry at most this many points (a page's weight stays bounded).
CHART_POINTS = 500
# A problem's kept list of kernels: replaced as soon as its set's version moves; this bounds memory.
SIBLINGS_SECONDS = 600


# ---------------------------------------------------------------------------------------------
# problem sets and levels


# ---------------------------------------------------------------------------------------------
# reported scores


@dataclass
class VariantGroup:
    """Reported scores of one variant (and metric and unit): the only scores ranked together."""

    variant: str
    metric: str
    unit: str
    scores: list[ReportedScore] = field(default_factory=list)  # best per model, best first
    total: int = 0  # models in the variant (scores may hold only the first of them)

    @property
    def key(self) -> str:
        return f"{self.variant} · {self.metric}"

    @property
    def shared_caveat(self) -> str:
        """The caveat every score of the group carries ('' if they differ): shown once."""
        caveats = {score.caveat for score in self.scores}
        return caveats.pop() if len(caveats) == 1 else ""


def reported_scores() -> QuerySet[ReportedScore]:
    return ReportedScore.objects.select_related("model__lab")


def best_reported_by_variant(scores: QuerySet[ReportedScore] | None = None) -> list[VariantGroup]:
    """Per (variant, metric, unit): each model's best score, ranked. Variants are never merged,
    so a number is only ever ranked against numbers of the same definition. Groups come with the
    most models first, then the most recent."""
    groups: dict[tuple[str, str, str], dict[int, ReportedScore]] = defaultdict(dict)
    for score in scores if scores is not None else reported_scores():
        best = groups[(score.variant, score.metric, score.unit)]
        current = best.get(score.model_id)
        if current is None or score.value > current.value:
            best[score.model_id] = score
    result = []
    for (variant, metric, unit), best in groups.items():
        ranked = sorted(best.values(), key=lambda s: (-s.value, s.model.name))
        result.append(VariantGroup(variant, metric, unit, ranked, len(ranked)))
    latest = {group.key: max(s.reported_on for s in group.scores) for group in result}
    result.sort(key=lambda g: (-len(g.scores), -latest[g.key].toordinal(), g.variant))
    return result


def overview_groups(groups: list[VariantGroup]) -> tuple[list[VariantGroup], int]:
    """The variants the overview shows (each cut to its best OVERVIEW_PER_VARIANT models), and
    how many variants were left out."""
    shown = [
        VariantGroup(g.variant, g.metric, g.unit, g.scores[:OVERVIEW_PER_VARIANT], g.total)
        for g in groups[:OVERVIEW_VARIANTS]
    ]
    return shown, max(0, len(groups) - OVERVIEW_VARIANTS)


def shown_scores(groups: list[VariantGroup]) -> list[ReportedScore]:
    """The reported scores that `groups` show (each variant's best models), for the overview's chart."""
    return [score for group in groups for score in group.scores]


def strongest_reported(groups: list[VariantGroup]) -> VariantGroup | None:
    """The variant with the most models compared (ties: the most recent); its leader is 'the
    strongest by reported score', always named with its variant."""
    comparable = [group for group in groups if len(group.scores) >= 2]
    if not comparable:
        return groups[0] if groups else None
    return max(comparable, key=lambda g: (max(s.reported_on for s in g.scores), len(g.scores)))


# ---------------------------------------------------------------------------------------------
# overview


def last_model_added() -> LanguageModel | None:
    return LanguageModel.objects.select_related("lab").order_by("-added_at", "-pk").first()


def latest_kernelbench_post() -> LaunchPost | None:
    return (
        LaunchPost.objects.filter(lists_kernelbench=True)
        .select_related("lab", "model")
        .order_by("-published_on")
        .first()
    )


def launch_posts() -> list[LaunchPost]:
    return list(LaunchPost.objects.select_related("lab", "model").order_by("-published_on")[:CHART_POINTS])


def overview_standings(problem_set: ProblemSet | None) -> tuple[Leaders, list[StandingRow]]:
    """The overview's leaders over all levels, by each source (measured here; published), and the
    rows measured here (best first; the first CHART_POINTS, all the chart draws) for its chart. On a site that has measured nothing yet, the
    synthetic demo runs stand in for the measured ones, carrying their demo label wherever shown."""
    if problem_set is None:
        return Leaders(None, None), []
    # Ranked by the database: the leaders and the chart's rows are read, not every run of the set.
    filters = BoardFilters(problem_set)
    real = board_runs(filters).exclude(origin=Origin.DEMO)
    return _overview(problem_set, ranked_standings(filters, runs=real))


def listed_overview_standings(problem_set: ProblemSet) -> tuple[Leaders, list[StandingRow]]:
    """overview_standings from every row of the set, ranked in Python (`level_standings`)."""
    real = [row for row in level_standings(BoardFilters(problem_set)) if row.run.origin != Origin.DEMO]
    return _overview(problem_set, ListedRows(real))


def _overview(problem_set: ProblemSet, real: Standings) -> tuple[Leaders, list[StandingRow]]:
    """The leaders of the set's real runs and their rows measured here; the demo runs' rows where
    none is measured here (a site that has measured nothing yet)."""
    best = real.leaders(1.0)
    measured = real.measured_rows()[:CHART_POINTS]
    if not measured:
        measured = level_standings(BoardFilters(problem_set, origin=Origin.DEMO))
        best = replace(best, measured=measured[0] if measured else None)
    return best, measured


# ---------------------------------------------------------------------------------------------
# model page


def model_runs(model: LanguageModel) -> QuerySet[Run]:
    return model.runs.select_related("model__lab", "hardware", "problem_set").order_by("-created_at", "-pk")


def model_level_scores(model: LanguageModel, runs: list[Run]) -> dict[int, dict[str, StandingRow]]:
    """For each of `runs` (a page of `model`'s): {level key ('all', '1'..'4'): its StandingRow}.

    Read from the same stored scores as the leaderboard (so the numbers are the leaderboard's),
    for these runs only: three queries, whatever the number of runs on the site."""
    counts: dict[int, dict[int, int]] = defaultdict(dict)
    problems = Problem.objects.filter(problem_set_id__in={run.problem_set_id for run in runs})
    for row in problems.values("problem_set_id", "level").annotate(n=Count("id")).order_by():
        counts[row["problem_set_id"]][row["level"]] = row["n"]
    scores = board_stored.scores_of_runs([run.pk for run in runs], [board_stored.ALL_LEVELS, *LEVELS], False)
    by_run: dict[int, dict[str, StandingRow]] = defaultdict(dict)
    for run in runs:
        all_levels = scores.get((run.pk, board_stored.ALL_LEVELS))
        run.measured_here = all_levels.measured if all_levels else 0  # board_stored.measured_here's count
        for level in (None, *LEVELS):
            n = sum(counts[run.problem_set_id].values()) if level is None else counts[run.problem_set_id].get(level, 0)
            if n:
                score = scores.get((run.pk, level or board_stored.ALL_LEVELS)) or LevelScore()
                by_run[run.pk]["all" if level is None else str(level)] = make_row(
                    run, level, score, n, None, RULE_SAMPLE0
                )
    return by_run


HistoryPoints = list[tuple[dt.datetime, StandingRow]]


def model_history_points(runs: list[Run], rows: dict[int, StandingRow]) -> tuple[HistoryPoints, HistoryPoints]:
    """The history chart's points of `runs` (a page of a model's), from their all-levels `rows`
    (by run id): (measured, published), each (date, row). One query.

    A run that ranks by its published figures (imported from a published leaderboard, not yet all
    measured here) plots its published fast_1, at the run's creation: published figures carry no
    date of their own. A run with evaluated kernels plots its fast_1 at its newest result's finish.
    A run with neither (imported and never measured, or still queued) is left out: its 0% would
    only mean "not measured yet"."""
    newest = dict(
        Kernel.objects.filter(run_id__in=list(rows), latest_evaluation__isnull=False)
        .order_by()
        .values("run_id")
        .annotate(at=Max("latest_evaluation__finished_at"))
        .values_list("run_id", "at")
    )
    measured: HistoryPoints = []
    published: HistoryPoints = []
    for run in runs:
        row = rows.get(run.pk)
        if row is None:
            continue
        if row.ranked_by == PUBLISHED:
            published.append((run.created_at, row))
        elif run.pk in newest:
            measured.append((newest[run.pk] or run.created_at, row))
    return measured, published


def model_reported_scores(model: LanguageModel) -> list[ReportedScore]:
    return list(model.reported_scores.select_related("model").order_by("variant", "-reported_on")[:CHART_POINTS])


# ---------------------------------------------------------------------------------------------
# problem page


def problem_baselines(problem: Problem) -> list[Baseline]:
    return list(problem.baselines.select_related("hardware").order_by("hardware__slug", "mode", "compile_variant"))


@dataclass(frozen=True)
class ReferenceTimes:
    """The reference's median times that a problem's evaluations recorded on one hardware, from
    one origin. Every measured speedup divides one of them: a page that shows those speedups has
    baseline timings, whether or not a Baseline row was imported for the problem."""

    hardware: str
    device_name: str
    source: str  # Origin's label: "measured here", "imported, unverified", "demo data (synthetic)"
    evaluations: int
    mean_ms: float
    fastest_ms: float
    slowest_ms: float


def problem_reference_times(problem: Problem) -> list[ReferenceTimes]:
    """One aggregate query over the problem's finished evaluations that timed the reference."""
    rows = (
        Evaluation.objects.filter(kernel__problem=problem, state=Evaluation.State.DONE, reference_ms__isnull=False)
        .values("hardware__name", "hardware__device_name", "origin")
        .annotate(
            evaluations=Count("pk"),
            mean_ms=Avg("reference_ms"),
            fastest_ms=Min("reference_ms"),
            slowest_ms=Max("reference_ms"),
        )
        .order_by("hardware__name", "origin")
    )
    return [
        ReferenceTimes(
            hardware=row["hardware__name"],
            device_name=row["hardware__device_name"],
            source=Origin(row["origin"]).label,
            evaluations=row["evaluations"],
            mean_ms=row["mean_ms"],
            fastest_ms=row["fastest_ms"],
            slowest_ms=row["slowest_ms"],
        )
        for row in rows
    ]


@dataclass(frozen=True)
class ProblemChecks:
    """What the latest evaluations of a problem's kernels found, counted in kernels."""

    evaluated: int  # kernels with a finished evaluation
    # whose evaluation found the reference output barely depends on its inputs, or is near zero,
    # so that a constant (zeros) output passes the tolerance (input_independent_reference,
    # near_zero_reference): a fact about the problem, seen by each kernel's evaluation
    zeros_pass: int
    precision_downgrade: int  # computed the problem in lower precision than it asks (TF32, fp16/bf16 casts)


ZEROS_PASS_CODES = ("input_independent_reference", "near_zero_reference")


def problem_checks(problem: Problem) -> ProblemChecks:
    """The problem page's checks: one aggregate query over the problem's kernels."""
    zeros = code_q(ZEROS_PASS_CODES[0]) | code_q(ZEROS_PASS_CODES[1])
    counts = Kernel.objects.filter(problem=problem, latest_evaluation__isnull=False).aggregate(
        evaluated=Count("pk"),
        zeros_pass=Count("pk", filter=zeros),
        precision_downgrade=Count("pk", filter=code_q("precision_downgrade")),
    )
    return ProblemChecks(**counts)


def kernels_ranked(problem: Problem) -> QuerySet[Kernel]:
    """Every kernel of `problem`, by the speedup it ranks by (Kernel.ranked_speedup: measured here,
    else imported, else published; a kernel that fails here ranks with the failed), then by status.
    Sorted by stored state (index kernel_problem_rank_idx), so the review annotations are computed
    for the page's rows only."""
    return (
        Kernel.objects.filter(problem=problem)
        .annotate(is_excluded=F("review_excluded"), latest_verdict=F("review_verdict"))
        .select_related("run__model__lab", "run__hardware", "latest_evaluation__hardware")
        .defer(
            "source",
            "latest_evaluation__log",
            "latest_evaluation__kernel_timing",
            "latest_evaluation__reference_timing",
        )
        # Kernels a reviewer excluded (reward hack, invalid) stay listed, after the ranked ones.
        .order_by("review_excluded", RANKED, "latest_evaluation__status", "pk")
    )


def problem_speedups(problem: Problem) -> list[tuple[int, str, bool, float, bool]]:
    """(kernel id, model name, demo, speedup, published) of the kernels of `problem` that count in
    rankings (not excluded by a reviewer) and have a speedup they rank by, fastest first;
    `published` where that speedup is a published figure, not one measured or imported here."""
    rows = (
        Kernel.objects.filter(problem=problem, ranked_speedup__isnull=False)
        .counted()
        .order_by(RANKED, "pk")
        .values_list("pk", "run__model__name", "run__is_demo", "ranked_speedup", "latest_speedup")[:CHART_POINTS]
    )
    return [(pk, name, demo, ranked, latest is None) for pk, name, demo, ranked, latest in rows]


# ---------------------------------------------------------------------------------------------
# kernel page


def kernel_for_page(pk: int) -> QuerySet[Kernel]:
    return Kernel.objects.filter(pk=pk).select_related(
        "problem__problem_set", "run__model__lab", "run__hardware", "run__problem_set", "latest_evaluation__hardware"
    )


@dataclass(frozen=True)
class Sibling:
    """Another kernel of the same problem, as the kernel page's "compare with" list names it."""

    pk: int
    model_name: str
    is_demo: bool
    speedup: float | None
    status_label: str  # its latest evaluation's status; "" when it has none

    @property
    def label(self) -> str:
        """ "kernel 12 · gpt-4o · 1.52x" (its status where it has no speedup)."""
        demo = " (demo data)" if self.is_demo else ""
        shown = f"{self.speedup:.2f}x" if self.speedup else self.status_label or "not evaluated"
        return f"kernel {self.pk} · {self.model_name}{demo} · {shown}"


def sibling_kernels(kernel: Kernel) -> list[Sibling]:
    """The other kernels of the same problem, fastest first (the speedup stored with each kernel's
    review state, which the order reads too), at most CHART_POINTS of them.

    The problem's list is kept in the cache under its set's board version: its order and labels are
    the read model's stored state (speedups, model names, the runs' kernels), which the re-scorer
    bumps that version after changing, and reading 500 kernels with their runs and models took 7 ms
    of a 37 ms page at 13 M."""
    state = board_stored.board_state(kernel.problem.problem_set)
    version, at = state.key
    key = f"siblings:{kernel.problem_id}:{version}:{at}"
    problem_kernels = cache.get(key)
    if problem_kernels is None:
        problem_kernels = _problem_kernels(kernel.problem_id)
        if state.updated_at is not None:  # without a version nothing could tell when it went stale
            cache.set(key, problem_kernels, SIBLINGS_SECONDS)
    return [other for other in problem_kernels if other.pk != kernel.pk][:CHART_POINTS]


def _problem_kernels(problem_id: int) -> list[Sibling]:
    """The first CHART_POINTS + 1 kernels of a problem, fastest first (so that CHART_POINTS remain
    once the page's own kernel is left out): plain values, not model instances (making 500 kernels
    with their runs, models and evaluations took most of the page's time). Only a kernel without a
    speedup has its evaluation's status looked up (a CASE runs its subquery for those rows alone):
    500 evaluations joined took 25 ms at 13 M."""
    status = Subquery(Evaluation.objects.filter(pk=OuterRef("latest_evaluation_id")).values("status")[:1])
    unscored = Q(latest_speedup__isnull=True) | Q(latest_speedup=0)
    rows = (
        Kernel.objects.filter(problem_id=problem_id)
        .annotate(shown_status=Case(When(unscored, then=status), default=Value("")))
        .order_by(FASTEST, "pk")  # kernel_fastest_idx
        .values_list("pk", "run__model__name", "run__is_demo", "latest_speedup", "shown_status")
    )[: CHART_POINTS + 1]
    labels = dict(Evaluation.Status.choices)
    return [Sibling(pk, name, demo, speedup, labels.get(status or "", "")) for pk, name, demo, speedup, status in rows]


def kernel_evaluations(kernel: Kernel) -> QuerySet[Evaluation]:
    return (
        kernel.evaluations.select_related("hardware")
        .defer("log", "kernel_timing", "reference_timing", "environment")
        .order_by("-queued_at", "-pk")
    )


# ---------------------------------------------------------------------------------------------
# lists and search


def models_list() -> QuerySet[LanguageModel]:
    # One counting subquery per shown row (not a join of runs x reported scores over every model).
    return (
        LanguageModel.objects.select_related("lab")
        .annotate(n_runs=_count_of(Run, "model"), n_reported=_count_of(ReportedScore, "model"))
        .order_by("name")
    )


def _count_of(model, field: str) -> Coalesce:
    rows = model.objects.filter(**{field: OuterRef("pk")}).order_by().values(field).annotate(n=Count("pk"))
    return Coalesce(Subquery(rows.values("n")), 0)


def problems_list(problem_set: ProblemSet | None = None, level: int | None = None) -> QuerySet[Problem]:
    # Kernel counts are stored (ProblemStats, kept by the boards' read model): no count over every kernel.
    problems = (
        Problem.objects.select_related("problem_set")
        .defer("source")
        .annotate(n_kernels=Coalesce(F("stats__n_kernels"), 0))
    )
    if problem_set is not None:
        problems = problems.filter(problem_set=problem_set)
    if level is not None:
        problems = problems.filter(level=level)
    return problems.order_by("problem_set__name", "level", "number")


def search_models(text: str) -> QuerySet[LanguageModel]:
    return models_list().filter(Q(name__icontains=text) | Q(lab__name__icontains=text))


def search_problems(text: str) -> QuerySet[Problem]:
    return problems_list().filter(Q(name__icontains=text) | Q(tags__icontains=text))
