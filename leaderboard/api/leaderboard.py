"""GET /api/v1/leaderboard/: the per-run fast_p table of one level, computed by
leaderboard.reads.standings like the level pages."""

from __future__ import annotations

from django.db.models import Count
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.exceptions import ValidationError
from rest_framework.renderers import BrowsableAPIRenderer
from rest_framework.response import Response
from rest_framework.views import APIView

from leaderboard.api.base import query_param
from leaderboard.api.common import query_bool, query_choice, query_float, query_int, query_text
from leaderboard.api.renderers import AsciiJSONRenderer
from leaderboard.api.runs import RunSerializer
from leaderboard.models import Origin, Run
from leaderboard.reads.standings import level_standings
from problems.models import Hardware, ProblemSet

LEADERBOARD_REPLY = inline_serializer(
    "Leaderboard",
    {
        "problem_set": serializers.CharField(),
        "level": serializers.IntegerField(allow_null=True),
        "p": serializers.FloatField(),
        "hardware": serializers.CharField(allow_null=True),
        "results": inline_serializer(
            "LeaderboardRow",
            {
                "rank": serializers.IntegerField(),
                "run": RunSerializer(),
                "fast_p": serializers.FloatField(),
                "unscored": serializers.IntegerField(help_text="Correct kernels with no known speedup."),
                "flagged": serializers.IntegerField(),
                "unreviewed": serializers.IntegerField(),
                "excluded": serializers.IntegerField(),
                "summary": serializers.DictField(),
            },
            many=True,
        ),
    },
)


def _problem_set(request) -> ProblemSet:
    """The set named by ?set=, else the only one; a 400 naming the problem otherwise."""
    slug = query_text(request, "set")
    if slug:
        problem_set = ProblemSet.objects.filter(slug=slug).first()
        if problem_set is None:
            raise ValidationError({"set": f"no problem set {slug!r}"})
        return problem_set
    try:
        return ProblemSet.objects.sole()
    except ProblemSet.DoesNotExist:
        raise ValidationError({"set": "no problem set exists yet"}) from None
    except ProblemSet.MultipleObjectsReturned:
        raise ValidationError({"set": "give a problem set slug"}) from None


def _hardware(request) -> Hardware | None:
    slug = query_text(request, "hardware")
    if not slug:
        return None
    hardware = Hardware.objects.resolve(slug)
    if hardware is None:
        raise ValidationError({"hardware": f"no hardware {slug!r}"})
    return hardware


def _results(request, rows, p: float) -> list[dict]:
    """Ranked rows as LeaderboardRow; each run with its kernel count, in one query for all."""
    run_ids = [row.run.pk for row in rows]
    kernel_counts = dict(Run.objects.filter(pk__in=run_ids).annotate(n=Count("kernels")).values_list("pk", "n"))
    results = []
    for rank, row in enumerate(rows, start=1):
        row.run.kernel_count = kernel_counts.get(row.run.pk, 0)
        results.append(
            {
                "rank": rank,
                "run": RunSerializer(row.run, context={"request": request}).data,
                "fast_p": row.fast_p(p),
                "unscored": row.unscored,
                "flagged": row.flagged,
                "unreviewed": row.unreviewed,
                "excluded": row.excluded,
                "summary": row.summary,
            }
        )
    return results


class LeaderboardView(APIView):
    permission_classes: list[type] = []
    renderer_classes = [AsciiJSONRenderer, BrowsableAPIRenderer]

    @extend_schema(
        summary="Per-run fast_p table of one level (or all levels)",
        description="Computed by leaderboard.reads.standings, the same code the pages use. fast_p keys are named "
        "fast_<p> (fast_0, fast_0.5, fast_0.8, fast_1, fast_1.5, fast_2, plus the p asked).",
        parameters=[
            query_param("set", description="Problem set slug; needed when more than one set exists."),
            query_param("level", int, "Level 1-4; absent for all levels together."),
            query_param("p", float, "The speedup threshold to rank by (default 1.0)."),
            query_param("hardware", description="Hardware slug."),
            query_param("setting", description="Setting, exactly."),
            query_param("origin", enum=[v for v, _ in Origin.choices]),
            query_param("include_excluded", bool, "Count kernels judged reward hacks or invalid too (default false)."),
        ],
        responses={200: LEADERBOARD_REPLY},
    )
    def get(self, request):
        problem_set = _problem_set(request)
        level = query_int(request, "level", low=1, high=4)
        p = query_float(request, "p", low=0.0, high=1000.0)
        hardware = _hardware(request)
        origin = query_choice(request, "origin", Origin.choices)
        rows = level_standings(
            problem_set,
            level,
            p=p,
            hardware=hardware,
            setting=query_text(request, "setting"),
            origin=origin,
            include_excluded=bool(query_bool(request, "include_excluded")),
        )
        shown_p = 1.0 if p is None else p
        return Response(
            {
                "problem_set": problem_set.slug,
                "level": level,
                "p": shown_p,
                "hardware": hardware.slug if hardware else None,
                "results": _results(request, rows, shown_p),
            }
        )
