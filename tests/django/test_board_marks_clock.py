"""Board marks are timed by the database's clock. A GPU host whose clock ran 10 minutes behind
wrote its marks (DirtyRun.marked_at, auto_now: the writer's clock) 10 minutes in the past: /healthz
reported the oldest mark waiting 600 s and "ok": false while the re-scorer kept up. Now a mark's
times come from the database, whichever host writes or reads them. (Python's clock is faked by
patching django.utils.timezone.now, as tests/integration/test_faults_clock.py does.)"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.cache import cache
from django.db import transaction
from django.utils import timezone

from leaderboard.boards import marks as board_marks
from leaderboard.boards import stored as board_stored
from leaderboard.evaluations.clock import db_now
from leaderboard.models import DirtyRun
from leaderboard.ops.health import boards as health_of_boards
from tests.django.reviews_factories import world_fixture  # noqa: F401  (fixtures)
from tests.integration.fault_report import record

pytestmark = pytest.mark.django_db(transaction=True)  # real transactions: a mark per transaction


@pytest.fixture(autouse=True)
def _rescorer(settings):
    settings.BOARD_RESCORER = True  # writers only mark; nothing re-scores the marks in the test
    cache.clear()


@pytest.mark.parametrize("skew_s", [-600, 600])
def test_a_writer_with_its_clock_off_marks_by_the_database_clock(world, monkeypatch, skew_s):
    kernel = world.kernel(world.problems[0], sample=0)
    DirtyRun.objects.all().delete()
    real_now = timezone.now
    with monkeypatch.context() as skewed:
        skewed.setattr(timezone, "now", lambda: real_now() + timedelta(seconds=skew_s))
        with transaction.atomic():
            board_marks.mark_runs([kernel.run_id])
        with transaction.atomic():
            board_marks.mark_problems([(world.kernel(world.problems[1], sample=0).run_id, world.problems[1].pk)])

    mark = DirtyRun.objects.get()
    assert abs((db_now() - mark.marked_at).total_seconds()) < 30
    assert abs((db_now() - mark.last_marked_at).total_seconds()) < 30
    assert 0 <= board_stored.oldest_mark_seconds() < 30
    health = health_of_boards()
    assert health["ok"] is True and health["oldest_mark_waiting_s"] < 30
    record(f"4. board marks written by a host {skew_s:+d} s off", oldest_mark_waiting_s=health["oldest_mark_waiting_s"],
           healthz_boards_ok=health["ok"])  # fmt: skip


def test_a_reader_with_its_clock_off_reads_the_age_by_the_database_clock(world, monkeypatch):
    kernel = world.kernel(world.problems[0], sample=0)
    with transaction.atomic():
        board_marks.mark_runs([kernel.run_id])
    real_now = timezone.now
    monkeypatch.setattr(timezone, "now", lambda: real_now() + timedelta(seconds=600))
    assert 0 <= board_stored.oldest_mark_seconds() < 30
