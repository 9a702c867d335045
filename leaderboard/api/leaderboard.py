"""GET /api/v1/leaderboard/: the per-run fast_p table of one level, computed by
leaderboard.reads.board.rows like the level pages."""

from __future__ import annotations

import functools

from django.http import QueryDict
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.exceptions import ValidationError
from rest_framework.renderers import BrowsableAPIRenderer
from rest_framework.response import Response
from rest_framework.utils.urls import replace_query_param
from rest_framework.views import APIView

from leaderboard.api.base import query_param
from leaderboard.api.common import query_bool, query_choice, query_float, query_int, query_text
from leaderboard.api.renderers import AsciiJSONRenderer, RenderedJSON
from leaderboard.api.runs import RunSerializer
from leaderboard.boards.scoring import RULE_SAMPLE0, RULES
from leaderboard.models import Origin, Precision, Run
from leaderboard.reads.board import params as board_params
from leaderboard.reads.board import served
from leaderboard.reads.board.choices import BoardFilters
from leaderboard.reads.board.featured import featured_problem_set
from leaderboard.reads.board.page import attach_repeats
from leaderboard.reads.board.ranked import ranked_standings
from problems.models import Hardware, ProblemSet

PAGE_SIZE = 50
MAX_PAGE_SIZE = 500
# What get() reads; the rest of a query string is dropped before the cache sees it (junk parameters
# would each make a new cache entry).
BOARD_PARAMETERS = "set level p hardware setting origin precision include_excluded rule page page_size".split()

LEADERBOARD_REPLY = inline_serializer(
    "Leaderboard",
    {
        "problem_set": serializers.CharField(),
        "level": serializers.IntegerField(allow_null=True),
        "p": serializers.FloatField(),
        "hardware": serializers.CharField(allow_null=True),
        "count": serializers.IntegerField(help_text="Rows in all pages."),
        "as_of": serializers.DateTimeField(
            help_text="Every result stored before this time is counted; newer ones within BOARD_FRESHNESS_SECONDS."
        ),
        "next": serializers.URLField(allow_null=True),
        "previous": serializers.URLField(allow_null=True),
        "results": inline_serializer(
            "LeaderboardRow",
            {
                "rank": serializers.IntegerField(),
                "run": RunSerializer(),
                "fast_p": serializers.FloatField(
                    help_text="fast_p at p by the row's one source: measured here, or published while not yet measured."
                ),
                "ranked_by": serializers.ChoiceField(choices=["measured", "published"]),
                "ranked_label": serializers.CharField(help_text='"measured here, h200" or "published, L40S".'),
                "hardware": serializers.CharField(help_text="Where the row's figures were timed."),
                "difference": serializers.FloatField(
                    allow_null=True, help_text="Measured minus published fast_p, over the problems measured here."
                ),
                "unscored": serializers.IntegerField(help_text="Correct kernels with no known speedup."),
                "flagged": serializers.IntegerField(),
                "unreviewed": serializers.IntegerField(),
                "excluded": serializers.IntegerField(),
                "interval": serializers.ListField(
                    child=serializers.FloatField(), help_text="95% bootstrap interval over problems of fast_p at p."
                ),
                "tied": serializers.BooleanField(help_text="The interval overlaps the row above's."),
                "summary": serializers.DictField(),
                "repeats": inline_serializer(
                    "LeaderboardRowRepeats",
                    {
                        "twice": serializers.IntegerField(help_text="The row's kernels measured twice or more here."),
                        "agree": serializers.IntegerField(
                            help_text="Of those, how many agree: the same verdict, and within 2% or a host-bound "
                            "measurement's interval covering the other's figure."
                        ),
                    },
                    allow_null=True,
                    help_text="Null when none of the row's kernels was measured twice on its run's hardware.",
                ),
            },
            many=True,
        ),
    },
)


def _problem_set(request) -> ProblemSet:
    """The set named by ?set= (slug or name, case-insensitive), else the featured one (what the
    boards open on); a 400 naming the problem and the sets otherwise."""
    name = query_text(request, "set")
    if name:
        problem_set = ProblemSet.objects.resolve(name)
        if problem_set is None:
            raise ValidationError({"set": f"no problem set {name!r}; the sets: {ProblemSet.objects.listing()}"})
        return problem_set
    problem_set = featured_problem_set()
    if problem_set is None:
        raise ValidationError({"set": "no problem set exists yet"})
    return problem_set


def _hardware(request) -> Hardware | None:
    slug = query_text(request, "hardware")
    if not slug:
        return None
    hardware = Hardware.objects.resolve(slug)
    if hardware is None:
        raise ValidationError({"hardware": f"no hardware {slug!r}"})
    return hardware


def _setting(request) -> str | None:
    """A setting some run has; a 400 otherwise (a free text would make a cache entry per text)."""
    setting = query_text(request, "setting")
    if setting and not Run.objects.filter(setting=setting).exists():
        raise ValidationError({"setting": f"no run has the setting {setting!r}"})
    return setting


def _filters(request) -> BoardFilters:
    """The board's filters from the query string; a 400 naming a value it does not know."""
    problem_set = _problem_set(request)  # checked in this order: the first bad value is the one answered
    p = query_float(request, "p", low=0.0, high=1000.0)
    return BoardFilters(
        problem_set=problem_set,
        level=query_int(request, "level", low=1, high=4),
        p=None if p is None else board_params.rounded_p(p),
        hardware=_hardware(request),
        setting=_setting(request),
        origin=query_choice(request, "origin", Origin.choices),
        precision=query_choice(request, "precision", Precision.choices),
        include_excluded=bool(query_bool(request, "include_excluded")),
        rule=query_choice(request, "rule", list(RULES.items())) or RULE_SAMPLE0,
    )


def _page_number(request, filters: BoardFilters, page_size: int) -> int:
    """The page asked for, one past the last answered as the last (counted only when past the first)."""
    asked = query_int(request, "page", low=1) or 1
    return int(board_params.canonical_page(str(asked), page_size, filters) or 1)


def _canonical(request, filters: BoardFilters, page: int, page_size: int) -> QueryDict:
    """The query string of what get() read, each value in one spelling and defaults left out: the
    board's cache key, so that `?level=01`, `?set=KERNELBENCH` or `?page_size=050` make no entry of
    their own. A page past the last was answered as the last, and is spelled so."""
    hardware = filters.hardware
    chosen = {
        "set": filters.problem_set.slug if query_text(request, "set") else None,
        "level": filters.level,
        "p": None if filters.p is None else format(filters.p, "g"),
        "hardware": hardware.slug if hardware else None,
        "setting": filters.setting,
        "origin": filters.origin,
        "precision": filters.precision,
        "include_excluded": "true" if filters.include_excluded else None,
        "rule": None if filters.rule == RULE_SAMPLE0 else filters.rule,
        "page": page if page > 1 else None,
        "page_size": page_size if page_size != PAGE_SIZE else None,
    }
    query = QueryDict(mutable=True)
    for name, value in chosen.items():
        if value is not None:
            query[name] = str(value)
    return query


def _results(request, rows, p: float, first_rank: int) -> list[dict]:
    """Ranked rows as LeaderboardRow; each run with its stored kernel count."""
    results = []
    for rank, row in enumerate(rows, start=first_rank):
        row.run.kernel_count = row.run.n_kernels
        results.append(
            {
                "rank": rank,
                # Kept for every visitor (served): the run as anyone may see it, whoever asked first.
                "run": RunSerializer(row.run, context={"request": request, "for_everyone": True}).data,
                # The figure the row ranks by, in the row's one source (as the board's headline).
                "fast_p": row.rank_value(p),
                "ranked_by": row.ranked_by,
                "ranked_label": row.ranked_label,
                "hardware": row.ranked_hardware,
                "difference": row.difference(p),
                "unscored": row.unscored,
                "flagged": row.flagged,
                "unreviewed": row.unreviewed,
                "excluded": row.excluded,
                "interval": list(row.interval) if row.interval else None,
                "tied": row.tied,
                "summary": row.summary,
                "repeats": {"twice": row.repeats.twice, "agree": row.repeats.agree} if row.repeats else None,
            }
        )
    return results


class LeaderboardView(APIView):
    permission_classes: list[type] = []
    renderer_classes = [AsciiJSONRenderer, BrowsableAPIRenderer]

    @extend_schema(
        summary="Per-run fast_p table of one level (or all levels)",
        description="Computed by leaderboard.reads.board.rows, the same code the pages use. fast_p keys are named "
        "fast_<p> (fast_0, fast_0.5, fast_0.8, fast_1, fast_1.5, fast_2, plus the p asked).",
        parameters=[
            query_param("set", description="Problem set slug or name (case-insensitive); default: the featured set."),
            query_param("level", int, "Level 1-4; absent for all levels together."),
            query_param("p", float, "The speedup threshold to rank by (default 1.0)."),
            query_param("hardware", description="Hardware slug."),
            query_param("setting", description="Setting, exactly, as some run has it (400 otherwise)."),
            query_param("origin", enum=[v for v, _ in Origin.choices]),
            query_param("precision", enum=list(Precision.values), description="fp32, fp16 or bf16 runs only."),
            query_param("include_excluded", bool, "Count kernels judged reward hacks or invalid too (default false)."),
            query_param("rule", enum=list(RULES), description="sample0 (KernelBench's, default) or best (best-of-n)."),
            query_param("page", int, "Page number (1-based); one past the last answers the last."),
            query_param("page_size", int, f"Rows per page (default {PAGE_SIZE}, at most {MAX_PAGE_SIZE})."),
        ],
        responses={200: LEADERBOARD_REPLY},
    )
    def get(self, request):
        board_params.keep_only(request._request, BOARD_PARAMETERS)
        filters = _filters(request)
        page_size = query_int(request, "page_size", low=1, high=MAX_PAGE_SIZE) or PAGE_SIZE
        page = _page_number(request, filters, page_size)
        # The cache key: what was read, each value spelled one way.
        board_params.use_query(request._request, _canonical(request, filters, page, page_size))
        # "json": the kind names the cache key, and a build is kept rendered; code that kept the data
        # itself used "data", so neither reads the other's builds across a deploy or a rollback.
        build = served.serve(
            request, filters.problem_set, "json", functools.partial(self._page, request, filters, page, page_size)
        )
        return build.not_modified(request) or build.stamp(Response(build.body, status=build.status))

    def _page(self, request, filters: BoardFilters, page: int, page_size: int, as_of) -> RenderedJSON:
        """One page of the board's rows, as the API answers it, "as of" the time its build read:
        kept rendered (each request sends the bytes)."""
        return RenderedJSON.of(self._page_data(request, filters, page, page_size, as_of))

    def _page_data(self, request, filters: BoardFilters, page: int, page_size: int, as_of) -> dict:
        rows = ranked_standings(filters)  # one page made, where the database can rank it
        shown_p = filters.picked_p
        first = (page - 1) * page_size
        shown = rows[first : first + page_size]
        attach_repeats(shown, filters.level)  # one query for the shown rows
        url = request.build_absolute_uri()
        return {
            "problem_set": filters.problem_set.slug,
            "level": filters.level,
            "p": shown_p,
            "hardware": filters.hardware.slug if filters.hardware else None,
            "count": len(rows),
            "next": replace_query_param(url, "page", page + 1) if first + page_size < len(rows) else None,
            "previous": replace_query_param(url, "page", page - 1) if page > 1 else None,
            "results": _results(request, shown, shown_p, first + 1),
            "as_of": as_of.isoformat(),
        }
