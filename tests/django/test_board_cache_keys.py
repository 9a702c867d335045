"""Issue 19, case 10: boards are cached per URL, so junk query parameters made new cache entries
(1,500 anonymous requests grew Redis from 2.6 MB to 144 MB). A board's URL is now cut to the
parameters it reads, each spelled one way (leaderboard.reads.board.params), before the cache sees
it: junk names, their order, and values that select the same board share one entry.

Counted as builds of the board (the view's render function), not as cache internals."""

from __future__ import annotations

from dataclasses import replace
from unittest import mock

import pytest
from django.core.cache import cache
from django.test import RequestFactory
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from leaderboard import views
from leaderboard.api.leaderboard import LeaderboardView
from leaderboard.models import Kernel, LanguageModel
from leaderboard.reads.board import page as board_page
from leaderboard.reads.board import params as board_query
from leaderboard.reads.board.params import read_level_board
from leaderboard.reads.board.rows import board_rows
from tests.django.reviews_factories import world_fixture  # noqa: F401  (fixtures)
from tests.rescoring import run_rescorer

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _empty_cache():
    cache.clear()
    yield
    cache.clear()


def builds(client, target, attribute: str, urls: list[str]) -> int:
    """How many times the board was built while every URL was fetched (anonymously)."""
    real = getattr(target, attribute)
    with mock.patch.object(target, attribute, autospec=True, side_effect=real) as build:
        for url in urls:
            assert client.get(url).status_code == 200, url
    return build.call_count


def test_junk_parameters_hit_the_level_boards_one_entry(client, world):
    world.kernel(world.problems[0], speedup=2.5)
    run_rescorer()
    urls = ["/levels/1/", "/levels/1/?junk=1", "/levels/1/?junk=2&utm_source=x", "/levels/1/?cb=123456"]
    assert builds(client, board_page, "_build", urls) == 1
    html = client.get("/levels/1/?junk=evil-marker").content.decode()
    assert "evil-marker" not in html  # the page's links carry only what it read


def test_values_that_select_the_same_board_share_an_entry(client, world):
    world.kernel(world.problems[0], speedup=2.5)
    run_rescorer()
    same_p = ["/levels/1/?p=1.5", "/levels/1/?p=1.50&junk=1", "/levels/1/?p=%201.5%20"]
    assert builds(client, board_page, "_build", same_p) == 1
    unknown = ["/levels/1/?origin=nonsense", "/levels/1/?origin=other", "/levels/1/", "/levels/1/?hardware=nowhere"]
    assert builds(client, board_page, "_build", unknown) == 1
    no_such = ["/levels/1/?setting=a", "/levels/1/?setting=b", "/levels/1/?sort=x", "/levels/1/?sort=y&sort=z"]
    assert builds(client, board_page, "_build", no_such) == 2  # one for no setting, one for no sort


def test_junk_parameters_hit_the_overview_and_the_api_boards_one_entry(client, world):
    world.kernel(world.problems[0], speedup=2.5)
    run_rescorer()
    assert builds(client, views, "_overview", ["/", "/?junk=1", "/?x=y&z=w"]) == 1
    api = ["/api/v1/leaderboard/?level=1", "/api/v1/leaderboard/?level=1&junk=1", "/api/v1/leaderboard/?junk=2&level=1"]
    assert builds(client, LeaderboardView, "_page", api) == 1


NAMES = ["p", "set", "hardware", "setting", "origin", "precision", "exclusions", "rule", "sort", "dir", "page", "junk"]
VALUES = [
    "",
    "1",
    "1.0",
    "0.5",
    "abc",
    "-3",
    "h200",
    "measured",
    "fp16",
    "include",
    "best",
    "asc",
    "fast_1",
    "fast_0.5",
    "model",
    "one-shot",
    "2",
    "x" * 300,
]


@hsettings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(st.tuples(st.sampled_from(NAMES), st.sampled_from(VALUES)), max_size=8))
def test_the_canonical_query_selects_the_same_board_and_is_its_own_canonical_form(world, pairs):
    """Random query strings: the board the canonical query selects shows the same runs in the same
    order with the same choices, and canonicalising again changes nothing."""
    if not Kernel.objects.exists():  # the world lives across examples
        world.kernel(world.problems[0], speedup=2.5)
        world.kernel(world.problems[1], run=world.new_run(LanguageModel.objects.create(name="Other")), speedup=0.5)
    request = RequestFactory().get("/levels/1/", pairs)
    board = read_level_board("1", request.GET)
    query = board_query.level_board_query(request, board)
    board_query.use_query(request, query)
    again = read_level_board("1", request.GET)
    assert [row.run.pk for row in board_rows(again)] == [row.run.pk for row in board_rows(board)]
    # The setting may be respelled (one no run has is "?"): the same board, without rows of that setting.
    assert replace(again.filters, setting=None) == replace(board.filters, setting=None)
    assert again.descending == board.descending
    assert board_query.level_board_query(request, again) == query


# A stream of new keys from anonymous visitors would take each process's one rebuild slot from the
# boards people read (and answer cold boards 503): every parameter that reaches a key is spelled
# one way, and a value that names nothing makes no key of its own.


def test_page_numbers_are_clamped_to_the_pages_the_level_board_has(client, world):
    world.kernel(world.problems[0], speedup=2.5)
    world.kernel(world.problems[0], run=world.new_run(LanguageModel.objects.create(name="Other")), speedup=0.5)
    run_rescorer()
    with mock.patch.object(board_query, "PER_PAGE", 1):  # two runs: two pages
        first = ["/levels/1/", "/levels/1/?page=1", "/levels/1/?page=01", "/levels/1/?page=0", "/levels/1/?page=-4"]
        assert builds(client, board_page, "_build", first) == 1
        last = ["/levels/1/?page=2", "/levels/1/?page=02", "/levels/1/?page=3", "/levels/1/?page=99999"]
        assert builds(client, board_page, "_build", last) == 1


def test_the_grid_is_kept_under_its_sets_slug(client, world):
    world.kernel(world.problems[0], speedup=2.5)
    run_rescorer()
    named = ["/levels/1/grid/?set=s", "/levels/1/grid/?set=S", "/levels/1/grid/?set=%20s%20"]
    assert builds(client, board_page, "_grid", named) == 1
    unknown = ["/levels/1/grid/", "/levels/1/grid/?set=nope", "/levels/1/grid/?set=other"]
    assert builds(client, board_page, "_grid", unknown) == 1  # the default set, as with no name


def test_the_api_boards_parameters_are_spelled_one_way(client, world):
    world.kernel(world.problems[0], speedup=2.5)
    run_rescorer()
    same = [
        "/api/v1/leaderboard/?level=1&set=s",
        "/api/v1/leaderboard/?level=01&set=S&page=01&page_size=050",
        "/api/v1/leaderboard/?set=s&level=1&page=99999&hardware=&include_excluded=no",
    ]
    assert builds(client, LeaderboardView, "_page", same) == 1
    assert (
        builds(
            client,
            LeaderboardView,
            "_page",
            ["/api/v1/leaderboard/?level=1&include_excluded=" + v for v in ("1", "yes", "TRUE")],
        )
        == 1
    )
    assert (
        builds(
            client, LeaderboardView, "_page", ["/api/v1/leaderboard/?level=1&hardware=" + v for v in ("h200", "H200")]
        )
        == 1
    )


def test_the_api_refuses_a_setting_no_run_has_before_it_builds_anything(client, world):
    world.kernel(world.problems[0], speedup=2.5)
    with mock.patch.object(LeaderboardView, "_page", autospec=True) as build:
        for text in ("a", "b", "c"):
            assert client.get(f"/api/v1/leaderboard/?level=1&setting={text}").status_code == 400
    assert build.call_count == 0
    assert client.get("/api/v1/leaderboard/?level=1&setting=one-shot").json()["count"] == 1


def test_the_boards_catalogue_of_choices_is_kept_and_renewed_by_a_write(client):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from problems.models import Hardware
    from tests.pagekit import make_run, make_set

    make_run(make_set("KernelBench v0.1", levels=(1,)))
    run_rescorer()  # the set's version moves
    client.get("/levels/1/")
    with CaptureQueriesContext(connection) as kept:
        assert client.get("/levels/1/?hardware=b200").status_code == 200
    tables = " ".join(query["sql"] for query in kept.captured_queries)
    assert '"problems_hardware"' not in tables and '"problems_problem"' not in tables, tables
    Hardware.objects.create(slug="b200", name="B200")  # a new choice: the filter must know it
    html = client.get("/levels/1/?hardware=b200").content.decode()
    assert '<option value="b200" selected>B200</option>' in html


def test_a_catalogue_write_shows_whichever_process_made_it():
    # Another process (a command on another host, a test's own process beside a live site) writes
    # with a cache of its own: all this process sees is the versions it moved in the database.
    from django.db.models.functions import Now

    from leaderboard.models import BoardVersion
    from leaderboard.reads.board import catalogue
    from problems.models import Hardware
    from tests.pagekit import make_run, make_set

    make_run(make_set("KernelBench v0.1", levels=(1,)))
    hardware = Hardware.objects.get()
    assert [h.name for h in catalogue.choices()[1]] == [hardware.name]
    Hardware.objects.filter(pk=hardware.pk).update(name="Renamed elsewhere")  # no signal, no cache here
    BoardVersion.objects.update(updated_at=Now())  # what that process's bump_all_versions wrote
    assert [h.name for h in catalogue.choices()[1]] == ["Renamed elsewhere"]


def test_the_catalogues_key_draws_no_cache_key_warning():
    # A key with a space (a timestamp as the cursor gives it) drew Django's memcached warning on every
    # board request.
    from django.core.cache.backends.base import memcache_key_warnings

    from leaderboard.reads.board import catalogue
    from tests.pagekit import make_run, make_set

    make_run(make_set("KernelBench v0.1", levels=(1,)))
    run_rescorer()
    key = catalogue._key()
    assert "none" not in key and list(memcache_key_warnings(key)) == []
