"""Boards ranked by the database (leaderboard/reads/board/ranked.py) give exactly the rows, order,
intervals, ties and leaders of ranking every row in Python (`rows.level_standings`), and the pages,
downloads and API answers built either way are the same text; a board's build makes one page of
rows and its queries do not grow with the runs of the set."""

from __future__ import annotations

import random
import re
from array import array

import pytest
from django.core.cache import cache

from leaderboard.boards import stored as board_stored
from leaderboard.boards.scoring import RULE_BEST, RULE_SAMPLE0, STANDARD_PS, LevelScore, Tally
from leaderboard.models import BoardVersion, LanguageModel, Run, RunScore
from leaderboard.reads import queries
from leaderboard.reads.board import ranked, rows
from leaderboard.reads.board.choices import BoardFilters
from tests.django.reviews_factories import world_fixture  # noqa: F401  (fixtures)

pytestmark = pytest.mark.django_db

SPEEDUPS = (0.4, 0.9, 1.0, 1.2, 1.6, 2.5)  # few values: many rows tie on their counts


def tally(rng: random.Random, n: int) -> Tally:
    correct = rng.randint(0, n)
    unscored = rng.randint(0, correct) if rng.random() < 0.3 else 0
    values = sorted(rng.choice(SPEEDUPS) for _ in range(correct - unscored))
    return Tally(correct + rng.randint(0, n - correct), correct, correct, unscored, array("d", values), 0.0)


def random_score(rng: random.Random, n: int) -> LevelScore:
    """A stored score of every kind a board ranks: measured only, published and partly measured,
    published and all measured, published and nothing measured."""
    kernels = rng.randint(0, n)
    published = Tally()
    if rng.random() < 0.4:
        count = rng.randint(1, n)
        published = Tally(count, count, count, 0, array("d", sorted(rng.choice(SPEEDUPS) for _ in range(count))))
    measured = rng.choice([0, kernels, rng.randint(0, kernels)])
    return LevelScore(
        tally(rng, n), tally(rng, n), 0.5, kernels, rng.randint(0, 2), 0, rng.randint(0, 1), measured,
        published, "L40S" if published.correct else "",
    )  # fmt: skip


def seed_runs(world, count: int, seed: int = 0) -> list[Run]:
    """`count` more runs of the world's set, each with stored scores (one run in ten with none on
    level 1): written as the re-scorer stores them, without kernels."""
    rng = random.Random(seed)
    models = [LanguageModel.objects.create(name=f"R{seed}-{n}") for n in range(count)]
    runs = Run.objects.bulk_create(
        [
            Run(
                model=model,
                problem_set=world.problem_set,
                rules_id=world.run.rules_id,
                hardware=world.hardware,
                origin=rng.choice(["measured", "imported"]),
            )
            for model in models
        ]
    )
    scores = []
    for run in [world.run, *runs] if seed == 0 else runs:  # the world's run once
        for level, n in ((1, 4), (board_stored.ALL_LEVELS, 5)):
            if level == 1 and rng.random() < 0.1:
                continue
            for with_excluded in (False, True):
                scores.append(board_stored.to_model(run.pk, level, with_excluded, random_score(rng, n)))
    RunScore.objects.bulk_create(scores)
    BoardVersion.objects.update_or_create(problem_set=world.problem_set, defaults={"version": seed + 1})
    return runs


def comparable(row) -> tuple:
    return row.run.pk, row.interval, row.tied, row.ranked_by, row.summary


def comparable_leaders(found: rows.Leaders) -> tuple:
    pk = lambda row: row.run.pk if row else None  # noqa: E731
    return pk(found.measured), pk(found.published), found.p, found.partly, found.partly_measured, found.partly_kernels


@pytest.mark.parametrize("level", [1, None])
@pytest.mark.parametrize("rule", [RULE_SAMPLE0, RULE_BEST])
@pytest.mark.parametrize("include_excluded", [False, True])
def test_the_database_ranks_as_python_does(world, level, rule, include_excluded):
    seed_runs(world, 80)
    for p in (None, *STANDARD_PS):
        for origin in (None, "imported"):
            asked = {"p": p, "rule": rule, "include_excluded": include_excluded, "origin": origin}
            filters = BoardFilters(world.problem_set, level, **asked)
            listed = rows.level_standings(filters)
            by_db = ranked.ranked_standings(filters)
            assert isinstance(by_db, ranked.RankedRows)
            assert len(by_db) == len(listed)
            for start, stop in ((0, 7), (5, 12), (1, 2), (30, 80), (0, len(listed))):
                assert [comparable(row) for row in by_db[start:stop]] == [comparable(r) for r in listed[start:stop]]
            leader_p = 1.0 if p is None else p
            assert comparable_leaders(by_db.leaders(leader_p)) == comparable_leaders(rows.leaders(listed, leader_p))
            assert by_db.any_published == any(row.has_published for row in listed)


def test_a_p_no_column_holds_is_ranked_in_python(world):
    seed_runs(world, 5)
    assert isinstance(ranked.ranked_standings(BoardFilters(world.problem_set, 1, p=1.3)), rows.ListedRows)


def test_the_overview_ranked_by_the_database_is_the_listed_one(world):
    seed_runs(world, 60)
    best, measured = queries.overview_standings(world.problem_set)
    listed_best, listed = queries.listed_overview_standings(world.problem_set)
    assert comparable_leaders(best) == comparable_leaders(listed_best)
    assert [row.run.pk for row in measured] == [row.run.pk for row in listed[: queries.CHART_POINTS]]


def made_rows(monkeypatch) -> list[int]:
    """Counts the rows a build makes (`rows.make_row`)."""
    made: list[int] = []
    original = rows.make_row

    def counting(run, *args, **kwargs):
        made.append(run.pk)
        return original(run, *args, **kwargs)

    monkeypatch.setattr(rows, "make_row", counting)
    return made


BOARDS = ["/levels/1/", "/levels/all/", "/api/v1/leaderboard/?level=1"]


@pytest.mark.parametrize("url", BOARDS)
def test_a_build_makes_one_page_of_rows_whatever_the_runs(
    world, client, monkeypatch, django_assert_max_num_queries, url
):
    seed_runs(world, 150)
    made = made_rows(monkeypatch)
    cache.clear()
    with django_assert_max_num_queries(80) as few:
        assert client.get(url).status_code == 200
    assert 0 < len(set(made)) <= 50 + 2  # the shown page, and the two leaders
    queries_at_150 = len(few.captured_queries)
    seed_runs(world, 300, seed=1)
    made.clear()
    cache.clear()
    with django_assert_max_num_queries(queries_at_150):  # no more queries with three times the runs
        assert client.get(url).status_code == 200
    assert len(set(made)) <= 52


def without_times(text: str) -> str:
    """An answer without its build's time (its "as of"), which differs between two builds."""
    return re.sub(r"\d{4}-\d\d-\d\dT[\d:.+]+|\d\d:\d\d:\d\d|data-as-of=\"[^\"]*\"", "T", text)


@pytest.mark.parametrize(
    "url",
    [
        "/levels/1/", "/levels/1/?page=2", "/levels/all/", "/levels/1/?rule=best", "/levels/1/?p=2",
        "/levels/1/?export=csv", "/levels/1/?export=json", "/levels/1/?exclusions=include&page=3", "/",
        "/api/v1/leaderboard/?level=1", "/api/v1/leaderboard/?page=2&page_size=30",
        "/api/v1/leaderboard/?level=1&p=0.5&rule=best",
    ],
)  # fmt: skip
def test_pages_downloads_and_api_are_the_same_text_either_way(world, client, monkeypatch, url):
    seed_runs(world, 120)
    cache.clear()
    by_db = client.get(url)
    monkeypatch.setattr(ranked, "STANDARD_PS", ())  # every board ranked in Python, as before
    cache.clear()
    listed = client.get(url)
    assert by_db.status_code == listed.status_code == 200
    assert without_times(by_db.content.decode()) == without_times(listed.content.decode())
