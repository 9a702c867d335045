"""The state a kept board is dated by (leaderboard/boards/stored.py), read in SQL of its own: the
same figures the rows hold, as aware datetimes on both databases, the marks of other sets and the
set-aside ones left out."""

from datetime import UTC, datetime, timedelta

import pytest

from leaderboard.boards import stored
from leaderboard.models import BoardVersion, DirtyRun
from tests.pagekit import make_run, make_set

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 12, 7, 12, 0, 0, 250000, tzinfo=UTC)


def _scored(problem_set, version: int, at: datetime) -> None:
    BoardVersion.objects.update_or_create(problem_set=problem_set, defaults={"version": version})
    BoardVersion.objects.filter(problem_set=problem_set).update(updated_at=at)  # past auto_now


def _mark(run, at: datetime, failed: bool = False) -> None:
    DirtyRun.objects.update_or_create(
        run_id=run.pk, defaults={"marked_at": at, "failed_at": at if failed else None, "whole": True}
    )


@pytest.fixture
def two_sets():
    ours, theirs = make_set("Ours", levels=(1,)), make_set("Theirs", levels=(1,))
    DirtyRun.objects.all().delete()  # whatever making the runs marked
    BoardVersion.objects.all().delete()
    return ours, theirs


def test_a_set_never_scored_has_no_state(two_sets):
    assert stored.board_state(two_sets[0]) == stored.BoardState(0, None, None)
    assert stored.board_state(None) == stored.BoardState(0, None, None)
    assert stored.every_set_state() == stored.BoardState(0, None, None)


def test_a_sets_state_is_its_version_and_its_oldest_waiting_mark(two_sets):
    ours, theirs = two_sets
    runs = [make_run(ours) for _ in range(3)]
    other = make_run(theirs)
    DirtyRun.objects.all().delete()
    _scored(ours, 7, T0)
    _scored(theirs, 3, T0 + timedelta(seconds=5))
    _mark(runs[0], T0 + timedelta(seconds=2))
    _mark(runs[1], T0 + timedelta(seconds=1), failed=True)  # set aside: not waiting
    _mark(other, T0 - timedelta(seconds=9))  # another set's
    state = stored.board_state(ours)
    assert state == stored.BoardState(7, T0, T0 + timedelta(seconds=2))
    assert state.updated_at.tzinfo is not None and state.dirty_since.tzinfo is not None
    assert state.key == (7, T0.isoformat())

    every = stored.every_set_state()
    assert every == stored.BoardState(10, T0 + timedelta(seconds=5), T0 - timedelta(seconds=9))
    assert every.updated_at.tzinfo is not None and isinstance(every.version, int)


def test_a_whole_second_reads_back_as_it_was_stored(two_sets):
    ours, _ = two_sets
    whole_second = T0.replace(microsecond=0)  # SQLite's text then has no fraction
    run = make_run(ours)
    _scored(ours, 1, whole_second)
    _mark(run, whole_second)
    assert stored.board_state(ours) == stored.BoardState(1, whole_second, whole_second)


def test_marks_waiting_before_any_set_was_scored_are_still_reported(two_sets):
    # Nothing scored yet (no version rows), results already stored: a build of every set's page is
    # as of the oldest of them (it is never kept without a version; served.py).
    run = make_run(two_sets[0])
    DirtyRun.objects.all().delete()
    BoardVersion.objects.all().delete()
    _mark(run, T0)
    assert stored.every_set_state() == stored.BoardState(0, None, T0)
