"""The boards open on the set that matters: FEATURED_PROBLEM_SET, else the set with the most
measured or imported runs, never the demo's set when another has runs (issue 21.2). The choice is
kept, renewed by the writes that change it: a board request does not count every run."""

import pytest
from django.core.cache import cache
from django.db import connection
from django.test.utils import CaptureQueriesContext

from leaderboard.models import Origin, Run
from leaderboard.reads.board import catalogue
from leaderboard.reads.board.featured import KEY, featured_problem_set, keep_featured, keep_featured_if_missing
from tests.pagekit import make_run, make_set, plain_static  # noqa: F401

pytestmark = pytest.mark.django_db


@pytest.fixture
def demo_and_real():
    starter = make_set("Starter v1", levels=(1, 1))
    for _ in range(3):
        make_run(starter, origin=Origin.DEMO, is_demo=True)
    kernelbench = make_set("KernelBench v0.1", levels=(1, 1, 1))
    make_run(kernelbench, origin=Origin.IMPORTED)
    return starter, kernelbench


def test_the_set_with_real_runs_wins_over_the_demo_set(demo_and_real):
    assert featured_problem_set() == demo_and_real[1]


def test_the_boards_open_on_it(client, demo_and_real):
    assert client.get("/levels/1/").context["problem_set"] == demo_and_real[1]
    assert client.get("/").context["problem_set"] == demo_and_real[1]


def test_the_setting_names_the_set_by_slug_or_name(settings, demo_and_real):
    settings.FEATURED_PROBLEM_SET = "starter v1"
    assert featured_problem_set() == demo_and_real[0]
    settings.FEATURED_PROBLEM_SET = "no-such-set"  # unknown: the default rule
    assert featured_problem_set() == demo_and_real[1]


def test_with_demo_runs_only_the_set_with_most_runs_is_featured():
    starter = make_set("Starter v1", levels=(1,))
    make_run(starter, origin=Origin.DEMO, is_demo=True)
    make_set("Empty", levels=(1,))
    assert featured_problem_set() == starter


def _runs_read(make_runs, n: int, starter) -> list[str]:
    """The SQL of one read of the featured set, after `n` more runs were added."""
    for _ in range(n):
        make_runs(starter)
    keep_featured()
    catalogue.choices()  # kept, as the request before left it
    with CaptureQueriesContext(connection) as read:
        assert featured_problem_set() is not None
    return [query["sql"] for query in read.captured_queries]


def test_a_board_request_reads_the_kept_choice_without_counting_runs(demo_and_real):
    starter, _ = demo_and_real
    few = _runs_read(lambda s: make_run(s, origin=Origin.DEMO, is_demo=True), 0, starter)
    many = _runs_read(lambda s: make_run(s, origin=Origin.DEMO, is_demo=True), 20, starter)
    assert len(few) == len(many) <= 1  # the catalogue's key
    assert not any(Run._meta.db_table in sql for sql in few + many)  # nothing that grows with the runs


def test_the_kept_choice_is_found_among_the_catalogues_sets_with_no_query(demo_and_real):
    _, kernelbench = demo_and_real
    keep_featured()
    sets = catalogue.problem_sets_with_counts()
    with CaptureQueriesContext(connection) as read:
        chosen = featured_problem_set(among=sets)
    assert chosen == kernelbench and chosen.total == kernelbench.problems.count()
    assert read.captured_queries == []


def test_a_kept_choice_the_catalogue_lacks_is_read_by_its_key(demo_and_real):
    _, kernelbench = demo_and_real
    keep_featured()
    assert featured_problem_set(among=[]) == kernelbench


def test_a_new_run_renews_the_kept_choice_once_committed(django_capture_on_commit_callbacks):
    starter = make_set("Starter v1", levels=(1,))
    make_run(starter, origin=Origin.DEMO, is_demo=True)
    kernelbench = make_set("KernelBench v0.1", levels=(1,))
    keep_featured()
    assert featured_problem_set() == starter
    with django_capture_on_commit_callbacks(execute=True):
        make_run(kernelbench, origin=Origin.IMPORTED)
    assert cache.get(KEY) == kernelbench.pk and featured_problem_set() == kernelbench


def test_keeping_it_if_missing_counts_only_when_nothing_is_kept(demo_and_real):
    starter, kernelbench = demo_and_real
    cache.set(KEY, starter.pk)  # kept (say, before the last write's commit renewed it)
    keep_featured_if_missing()
    assert cache.get(KEY) == starter.pk
    cache.delete(KEY)  # expired, or the cache emptied
    keep_featured_if_missing()
    assert cache.get(KEY) == kernelbench.pk
