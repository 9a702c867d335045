"""The level leaderboard ranks without excluded kernels, counts them per row, and toggles to the
scores before exclusions."""

import pytest

from tests.django.reviews_factories import _plain_static_files, review, world_fixture  # noqa: F401  (fixtures)
from tests.rescoring import run_rescorer

pytestmark = pytest.mark.django_db


@pytest.fixture
def board(world, reviewer):
    hack = world.kernel(world.problems[0], speedup=2.5, flags=("excessive_speedup",))
    world.kernel(world.problems[1], speedup=1.2)
    world.kernel(world.problems[2], speedup=1.1, flags=("timing_mismatch",))  # flagged, not reviewed
    review(hack, reviewer, "reward_hack", "no-op")
    run_rescorer()
    return f"/levels/1/?set={world.problem_set.slug}"


def test_the_board_ranks_without_excluded_kernels_and_counts_them(client, board):
    response = client.get(board)
    [row] = response.context["table"]
    assert row.standing.fast_p(1.0) == 2 / 4
    assert (row.standing.flagged, row.standing.unreviewed, row.standing.excluded) == (2, 1, 1)
    assert b"1 excluded by review" in response.content
    assert b"See the scores before exclusions" in response.content


def test_the_toggle_shows_the_scores_before_exclusions(client, board):
    response = client.get(board + "&exclusions=include")
    [row] = response.context["table"]
    assert row.standing.fast_p(1.0) == 3 / 4
    assert b"before reviewers' exclusions" in response.content
    assert b'name="exclusions" value="include"' in response.content  # kept when filters change


def test_the_json_export_says_which_scores_it_holds(client, board):
    ranked = client.get(board + "&export=json").json()
    before = client.get(board + "&exclusions=include&export=json").json()
    assert ranked["include_excluded"] is False and before["include_excluded"] is True
    assert ranked["rows"][0]["fast_1"] == 0.5 and before["rows"][0]["fast_1"] == 0.75
