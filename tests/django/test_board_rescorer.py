"""Writes that scale, where the site runs the boards' background re-scorer (BOARD_RESCORER): a
stored result costs its writer a few small queries and no re-scoring; the re-scorer
(`manage.py refresh_boards`) takes the marked runs in batches and leaves the stored boards equal
to a fresh computation; a mark it never takes stays, since reads never re-score
(tests/django/test_reads_never_write.py). (Without it, each write re-scores its runs after commit:
tests/django/test_board_read_model.py.) Runs on
SQLite and PostgreSQL alike."""

from __future__ import annotations

import io
import random
import threading
import time
from datetime import timedelta

import pytest
from django.conf import settings
from django.core.cache import cache
from django.core.management import call_command
from django.db import connection, connections, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from leaderboard.boards import marks as board_marks
from leaderboard.boards import rescorer
from leaderboard.boards import rescoring as board_rescoring
from leaderboard.boards import stored as board_stored
from leaderboard.evaluations import attempts
from leaderboard.models import DirtyRun, Evaluation, Kernel, LanguageModel, Run, RunScore
from leaderboard.reads.board import served
from leaderboard.reads.board.choices import BoardFilters
from leaderboard.reads.board.rows import level_standings, live_level_standings
from tests.django.reviews_factories import world_fixture  # noqa: F401  (fixtures)
from tests.django.test_board_read_model import boards, random_world
from tests.rescoring import run_rescorer

pytestmark = pytest.mark.django_db

CORRECT = {"status": "correct", "compiled": True, "correct": True, "speedup": 3.0}


@pytest.fixture(autouse=True)
def _rescorer(settings):
    settings.BOARD_RESCORER = True
    cache.clear()  # boards kept by other tests' databases


def claimed(world, kernel: Kernel) -> attempts.Claim:
    """A new evaluation of `kernel`, queued and claimed as a GPU worker claims it."""
    evaluation = Evaluation.objects.create(kernel=kernel, hardware=world.hardware)
    claim = attempts.claim(evaluation.pk, "gpu-host.1")
    assert claim is not None
    return claim


@pytest.mark.django_db(transaction=True)  # committed for real: what runs after commit is counted too
def test_storing_a_result_rescores_nothing_in_the_writer(world):
    kernels = [world.kernel(problem, sample=sample) for problem in world.problems for sample in range(3)]
    run_rescorer()
    claim = claimed(world, kernels[0])
    with CaptureQueriesContext(connection) as queries:
        assert attempts.store_result(claim, CORRECT)
    sql = [query["sql"].lower() for query in queries]
    assert not [q for q in sql if "runscore" in q or "boardversion" in q]  # no re-scoring, in or after it
    assert (
        len(sql) <= 11
    )  # the verdict, the kernel's latest evaluation, the run's and problem's marks: not the run's kernels
    assert DirtyRun.objects.filter(run_id=world.run.pk).exists()


def test_the_rescorer_makes_the_stored_boards_equal_a_fresh_computation(world, reviewer, visitor):
    kernels = random_world(world, random.Random(11), reviewer, visitor)
    run_rescorer()
    for kernel in random.Random(3).sample(kernels, 12):
        assert attempts.store_result(claimed(world, kernel), CORRECT)
    marked = DirtyRun.objects.count()
    assert marked > 2
    passes = []
    while (done := rescorer.rescore_pass(batch=2)).runs:
        passes.append(done)
    assert [done.runs for done in passes] == [2] * (marked // 2) + [marked % 2] * (marked % 2)
    assert all(done.db_seconds > 0 for done in passes)
    assert not DirtyRun.objects.exists()
    assert board_rescoring.verify_all() == []
    assert boards(world.problem_set, level_standings) == boards(world.problem_set, live_level_standings)


def test_the_rescorer_loop_stops_when_told(world):
    world.kernel(world.problems[0], speedup=2.0)
    stop, seen = threading.Event(), []
    rescorer.run(stop, poll=0, report=lambda done: (seen.append(done.runs), stop.set()))
    assert seen == [1]
    assert RunScore.objects.get(run=world.run, level=1, with_excluded=False).s0_correct == 1


@pytest.mark.django_db(transaction=True)
def test_a_board_read_leaves_fresh_and_lost_marks_alike_to_the_rescorer(world):
    world.kernel(world.problems[0], speedup=2.0)  # committed: its run is marked
    level_standings(BoardFilters(world.problem_set, 1))
    assert DirtyRun.objects.filter(run_id=world.run.pk).exists()
    lost = timezone.now() - timedelta(seconds=settings.BOARD_FRESHNESS_SECONDS + 1)
    DirtyRun.objects.update(marked_at=lost)  # the re-scorer died with it, or is stuck
    level_standings(BoardFilters(world.problem_set, 1))
    assert DirtyRun.objects.filter(run_id=world.run.pk).exists()
    assert rescorer.rescore_pass().runs == 1
    assert RunScore.objects.get(run=world.run, level=1, with_excluded=False).s0_correct == 1


@pytest.mark.django_db(transaction=True)
def test_without_a_rescorer_a_write_rescores_its_run_after_commit(world, settings):
    settings.BOARD_RESCORER = False
    world.kernel(world.problems[0], speedup=2.0)
    assert not DirtyRun.objects.exists()
    assert RunScore.objects.get(run=world.run, level=1, with_excluded=False).s0_correct == 1


def test_a_read_inside_a_transaction_leaves_its_own_marks(world):
    with transaction.atomic():
        world.kernel(world.problems[0], speedup=2.0)
        level_standings(BoardFilters(world.problem_set, 1))
        assert DirtyRun.objects.filter(run_id=world.run.pk).exists()
        assert not RunScore.objects.filter(run=world.run).exists()


def test_a_board_build_in_a_transaction_shows_its_writes_once_the_rescorer_took_them(world, client):
    world.kernel(world.problems[0], speedup=2.0)
    client.get("/levels/1/?export=json&set=s")  # built from the stored rows: none yet for this run
    assert Run.objects.get(pk=world.run.pk).n_kernels == 0
    run_rescorer()
    body = client.get("/levels/1/?export=json&set=s").json()
    assert [row["correct"] for row in body["rows"] if row["run_id"] == world.run.pk] == [0.25]  # 1 of 4 problems
    assert not DirtyRun.objects.exists()
    assert Run.objects.get(pk=world.run.pk).n_kernels == 1


@pytest.mark.django_db(transaction=True)
def test_a_board_built_while_marks_wait_for_the_rescorer_is_dated_before_them(world):
    world.kernel(world.problems[0], speedup=2.0)
    marked_at = DirtyRun.objects.get(run_id=world.run.pk).marked_at
    kept = served._build_and_keep("test-board", world.problem_set, lambda as_of: as_of)
    assert kept.body <= marked_at  # its "as of" claims no write it lacks
    assert DirtyRun.objects.filter(run_id=world.run.pk).exists()  # left to the re-scorer


@pytest.mark.django_db(transaction=True)
def test_healthz_says_degraded_when_marks_wait_for_a_rescorer_that_does_not_run(world, client):
    world.kernel(world.problems[0], speedup=2.0)
    assert client.get("/healthz").json()["boards"]["ok"] is True  # a fresh mark: the re-scorer's
    DirtyRun.objects.update(marked_at=timezone.now() - timedelta(minutes=5))
    health = client.get("/healthz").json()
    assert health["boards"]["ok"] is False and health["status"] in ("degraded", "unavailable")


def test_a_write_landing_during_a_rescoring_keeps_its_mark_for_the_next(world, monkeypatch):
    world.kernel(world.problems[0], speedup=2.0)
    read_kernels = board_stored.kernel_rows

    def a_write_lands_meanwhile(kernels, **options):
        rows = read_kernels(kernels, **options)
        board_marks.mark_runs([world.run.pk])  # after the re-scoring read the run: not in its rows
        return rows

    monkeypatch.setattr(board_rescoring, "kernel_rows", a_write_lands_meanwhile)
    assert rescorer.rescore_pass().runs == 1
    assert DirtyRun.objects.filter(run_id=world.run.pk).exists()  # the next pass takes it
    monkeypatch.undo()
    assert rescorer.rescore_pass().runs == 1 and not DirtyRun.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_a_pass_leaves_a_run_another_rescoring_holds_and_keeps_its_mark(world):
    if connection.vendor != "postgresql":
        pytest.skip("row locks: SQLite locks the whole database")
    world.kernel(world.problems[0], speedup=2.0)  # committed: its run is marked
    held, release = threading.Event(), threading.Event()

    def another_rescoring() -> None:
        with transaction.atomic():
            list(Run.objects.select_for_update().filter(pk=world.run.pk))
            held.set()
            release.wait(10)
        connections.close_all()

    holder = threading.Thread(target=another_rescoring)
    holder.start()
    try:
        assert held.wait(10)
        started = time.monotonic()
        rescorer.rescore_pass()
        assert time.monotonic() - started < 5  # it did not wait for the holder
        assert DirtyRun.objects.filter(run_id=world.run.pk).exists()
    finally:
        release.set()
        holder.join()
    assert rescorer.rescore_pass().runs == 1 and not DirtyRun.objects.exists()


def _hold_runs(run_ids: list[int]):
    """Another transaction (another re-scorer, a writer's re-scoring after its commit) holding these
    runs' row locks until the returned `release` is called."""
    held, done = threading.Event(), threading.Event()

    def holder() -> None:
        with transaction.atomic():
            list(Run.objects.select_for_update().filter(pk__in=run_ids))
            held.set()
            done.wait(20)
        connections.close_all()

    thread = threading.Thread(target=holder)
    thread.start()
    assert held.wait(10)

    def release() -> None:
        done.set()
        thread.join()

    return release


def _marked_runs(world, n: int) -> list[int]:
    """`n` runs with a kernel each, committed and marked, oldest first."""
    runs = [world.run] + [world.new_run(LanguageModel.objects.create(name=f"held-{k}")) for k in range(n - 1)]
    for run in runs:
        world.kernel(world.problems[0], speedup=2.0, run=run)
    base = timezone.now()
    for age, run in enumerate(runs):  # the first run marked longest ago
        DirtyRun.objects.filter(run_id=run.pk).update(marked_at=base - timedelta(seconds=len(runs) - age))
    return [run.pk for run in runs]


@pytest.mark.django_db(transaction=True)
def test_a_pass_moves_on_past_the_oldest_marks_when_another_transaction_holds_them(world):
    """The defect at 50 writes/s (docs/performance.md): a pass took the oldest marks, found their runs
    held by a long re-scoring elsewhere, skipped them all and reported a full batch; pass after pass
    re-scored nothing. A pass takes the oldest marked runs that nobody holds, and counts those."""
    if connection.vendor != "postgresql":
        pytest.skip("row locks: SQLite locks the whole database")
    ids = _marked_runs(world, 6)
    release = _hold_runs(ids[:2])  # the two oldest
    try:
        done = rescorer.rescore_pass(batch=2)
        assert done.runs == 2  # re-scored, not merely selected
        assert set(DirtyRun.objects.values_list("run_id", flat=True)) == {*ids[:2], *ids[4:]}
        assert rescorer.rescore_pass(batch=10).runs == 2
        assert rescorer.rescore_pass(batch=10).runs == 0  # only the held ones are left
        assert set(DirtyRun.objects.values_list("run_id", flat=True)) == set(ids[:2])
    finally:
        release()
    assert rescorer.rescore_pass(batch=10).runs == 2 and not DirtyRun.objects.exists()
    assert board_rescoring.verify_all() == []


def test_a_pass_counts_only_the_runs_it_rescored(world):
    """Runs and SQLite alike: a pass's count is the runs it re-scored; a mark whose run was deleted
    goes, uncounted."""
    ids = _marked_runs(world, 3)
    DirtyRun.objects.create(run_id=max(ids) + 1000)  # a deleted run's mark
    assert rescorer.rescore_pass(batch=2).runs == 2
    assert rescorer.rescore_pass(batch=2).runs == 1
    assert rescorer.rescore_pass(batch=2).runs == 0 and not DirtyRun.objects.exists()


def test_verify_makes_up_pending_marks_first_and_says_how_many(world):
    world.kernel(world.problems[0], speedup=2.0)  # marked, not yet re-scored (the re-scorer's)
    out = io.StringIO()
    call_command("rebuild_boards", "--verify-only", stdout=out)
    assert "1 run marked for re-scoring when the check began: re-scored first" in out.getvalue()
    assert not DirtyRun.objects.exists()


def test_a_mark_renewed_during_a_rescoring_moves_up_to_when_the_rescoring_read_it(world, monkeypatch):
    """A run written to on every pass keeps its mark, but not its first mark's time: otherwise it
    heads every batch and dates every board build back to it."""
    world.kernel(world.problems[0], speedup=2.0)
    long_ago = timezone.now() - timedelta(hours=1)
    DirtyRun.objects.update(marked_at=long_ago)
    read_kernels = board_stored.kernel_rows

    def a_write_lands_meanwhile(kernels, **options):
        rows = read_kernels(kernels, **options)
        board_marks.mark_runs([world.run.pk])
        return rows

    monkeypatch.setattr(board_rescoring, "kernel_rows", a_write_lands_meanwhile)
    # SQLite's clock (Now() in SQL) keeps milliseconds: a mark written within the same
    # millisecond as `before` reads up to 999 us earlier than Python's clock.
    now = timezone.now()
    before = now.replace(microsecond=now.microsecond - now.microsecond % 1000)
    assert rescorer.rescore_pass().runs == 1
    mark = DirtyRun.objects.get(run_id=world.run.pk)
    assert before <= mark.marked_at <= mark.last_marked_at
