"""Boards are cached by the read model's version and answer 304 to a visitor whose copy is current;
the API leaderboard pages its rows and carries intervals."""

from __future__ import annotations

import datetime as dt

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from leaderboard.boards.stored import BoardState
from leaderboard.models import LanguageModel
from leaderboard.reads.board.served import Kept, lacking_since
from tests.django.reviews_factories import review, world_fixture  # noqa: F401  (fixtures)
from tests.rescoring import run_rescorer

pytestmark = pytest.mark.django_db

API = "/api/v1/leaderboard/?level=1"


@pytest.mark.parametrize("url", ["/levels/1/", "/", API])
def test_a_current_copy_gets_a_304_and_a_write_changes_the_etag(client, world, reviewer, url):
    kernel = world.kernel(world.problems[0], speedup=2.5)
    run_rescorer()
    first = client.get(url)
    assert first.status_code == 200 and first["ETag"] and first["Last-Modified"]
    assert client.get(url, HTTP_IF_NONE_MATCH=first["ETag"]).status_code == 304
    review(kernel, reviewer, "reward_hack")
    run_rescorer()
    again = client.get(url, HTTP_IF_NONE_MATCH=first["ETag"])
    assert again.status_code == 200 and again["ETag"] != first["ETag"]


def test_the_cached_board_shows_a_fresh_write(client, world):
    world.kernel(world.problems[0], speedup=2.5)
    run_rescorer()
    assert "2.50x" in client.get("/levels/1/").content.decode()
    world.kernel(world.problems[1], speedup=3.5)
    assert "2.50x" in client.get("/levels/1/").content.decode()  # the stored rows, until re-scored
    run_rescorer()
    assert "2.96x" in client.get("/levels/1/").content.decode()  # the geomean of 2.5 and 3.5


def test_the_api_leaderboard_is_paginated_with_intervals(client, world):
    for n in range(3):
        run = world.new_run(LanguageModel.objects.create(name=f"X{n}"))
        world.kernel(world.problems[n], run=run, speedup=1.5 + n)
    body = client.get(API + "&page_size=2").json()
    assert body["count"] == 4 and len(body["results"]) == 2 and body["next"] and body["previous"] is None
    assert [row["rank"] for row in body["results"]] == [1, 2]
    low, high = body["results"][0]["interval"]
    assert 0 <= low <= body["results"][0]["fast_p"] <= high <= 1
    assert body["results"][1]["tied"] is True  # 1 of 4 problems each: intervals overlap
    rest = client.get(body["next"]).json()
    assert [row["rank"] for row in rest["results"]] == [3, 4] and rest["next"] is None


def test_a_kept_build_knows_how_old_the_oldest_write_it_lacks_is():
    """Exact when one version behind (the version's own time), its as-of time when more, a dirty
    mark's own time when that is older: never later than the truth."""
    at = [dt.datetime(2026, 1, 1, 0, 0, s, tzinfo=dt.UTC) for s in range(60)]
    built = BoardState(3, at[10], None)
    kept = Kept(body=None, version=built.key, modified=at[10], as_of=at[12].timestamp())
    assert lacking_since(kept, built) is None
    assert lacking_since(kept, BoardState(4, at[30], None)) == at[30].timestamp()
    assert lacking_since(kept, BoardState(6, at[30], None)) == at[12].timestamp()
    assert lacking_since(kept, BoardState(3, at[10], at[20])) == at[20].timestamp()
    assert lacking_since(kept, BoardState(4, at[30], at[20])) == at[20].timestamp()


@pytest.mark.parametrize("url", ["/levels/1/", "/", "/levels/1/grid/"])
def test_a_signed_in_visitor_gets_the_kept_board_with_their_own_header(client, world, reviewer, url):
    """No board is built per signed-in request (issue 30): the kept build is built for nobody, and
    only the header's visitor parts are rendered for the visitor; nobody else ever sees them."""
    world.kernel(world.problems[0], speedup=2.5)
    run_rescorer()
    client.force_login(reviewer)
    mine = client.get(url)  # the board's first request: it is built now, for nobody
    html = mine.content.decode()
    assert mine.status_code == 200 and "reviewer</span>" in html and "Sign out" in html and "Review queue" in html
    assert "private" in mine["Cache-Control"] and "public" not in mine["Cache-Control"]
    with CaptureQueriesContext(connection) as queries:
        again = client.get(url)
    assert again.status_code == 200 and "reviewer</span>" in again.content.decode()
    # The parameters (sets, hardware), session, user, board state, permissions; a build reads far more.
    assert len(queries) <= 10, [q["sql"].partition("FROM")[2][:40] for q in queries]
    client.logout()
    theirs = client.get(url).content.decode()
    assert "reviewer</span>" not in theirs and "Sign out" not in theirs and "Review queue" not in theirs
    assert "Sign in" in theirs
