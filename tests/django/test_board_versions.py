"""Issue 19, case 11: boards went stale after a Hardware rename (a 304 and a cached 200 with the old
name): hardware, problem and problem set saves did not bump the boards' version. Each now does
(leaderboard/boards/signals.py), so the ETag moves and the cache is not served."""

from __future__ import annotations

import pytest
from django.core.cache import cache

from problems.models import Hardware, Problem, ProblemSet
from tests.django.reviews_factories import world_fixture  # noqa: F401  (fixtures)

pytestmark = pytest.mark.django_db

BOARDS = ["/levels/1/", "/", "/api/v1/leaderboard/?level=1"]


@pytest.fixture(autouse=True)
def _empty_cache():
    cache.clear()
    yield
    cache.clear()


def rename_hardware(world) -> str:
    world.hardware.name = "H200 renamed"
    world.hardware.save()
    return "H200 renamed"


def rename_problem_set(world) -> str:
    problem_set = ProblemSet.objects.get(pk=world.problem_set.pk)
    problem_set.name = "Set renamed"
    problem_set.save()
    return "Set renamed"


def add_problem(world) -> str:
    Problem.objects.create(problem_set=world.problem_set, level=1, number=9, name="P9", source="x")
    return "P9"  # fast_p's denominator moves: five problems on level 1 now


@pytest.mark.parametrize("url", BOARDS)
@pytest.mark.parametrize("change", [rename_hardware, rename_problem_set, add_problem])
def test_a_change_shown_on_boards_moves_the_etag(client, world, url, change):
    world.kernel(world.problems[0], speedup=2.5)
    first = client.get(url)
    assert first.status_code == 200
    change(world)
    again = client.get(url, HTTP_IF_NONE_MATCH=first["ETag"])
    assert again.status_code == 200 and again["ETag"] != first["ETag"]


def test_a_hardware_rename_shows_on_the_cached_board(client, world):
    world.kernel(world.problems[0], speedup=2.5)
    assert "H200" in client.get("/levels/1/?hardware=h200").content.decode()
    shown = rename_hardware(world)
    assert shown in client.get("/levels/1/?hardware=h200").content.decode()
    run = client.get("/api/v1/leaderboard/?level=1").json()["results"][0]["run"]
    assert Hardware.objects.get(slug=run["hardware"]).name == shown


def test_a_problem_set_rename_shows_on_the_cached_board(client, world):
    world.kernel(world.problems[0], speedup=2.5)
    client.get("/levels/1/")
    assert rename_problem_set(world) in client.get("/levels/1/").content.decode()
