"""The boards open on the set that matters: FEATURED_PROBLEM_SET, else the set with the most
measured or imported runs, never the demo's set when another has runs (issue 21.2)."""

import pytest

from leaderboard.models import Origin
from leaderboard.reads.board.featured import featured_problem_set
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
