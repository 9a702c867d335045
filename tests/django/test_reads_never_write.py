"""Reads never write: a page, a download or an API read of stored scores performs no INSERT, UPDATE
or DELETE and takes no row lock, however stale the stored rows are. A mark a write left stays until
the background re-scorer takes it; the pages serve the stored rows as they are until then."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from leaderboard.models import DirtyRun, Kernel, RunScore
from tests.django.reviews_factories import world_fixture  # noqa: F401  (fixtures)
from tests.rescoring import run_rescorer

pytestmark = pytest.mark.django_db

WRITES = ("insert", "update", "delete", "replace")


def _writes(queries: CaptureQueriesContext) -> list[str]:
    """The statements that write, or lock rows as a writer does (FOR UPDATE)."""
    sql = [query["sql"].lower().lstrip() for query in queries.captured_queries]
    return [q for q in sql if q.startswith(WRITES) or " for update" in q]


# Every page, download and API read that shows stored scores or counts, as a visitor asks for it.
READS = {
    "overview": lambda w, k: "/",
    "overview of a set": lambda w, k: "/?set=s",
    "level board": lambda w, k: "/levels/1/?set=s",
    "level board csv": lambda w, k: "/levels/1/?set=s&export=csv",
    "level board json": lambda w, k: "/levels/1/?set=s&export=json",
    "all levels": lambda w, k: "/levels/all/?set=s",
    "grid": lambda w, k: "/levels/1/grid/?set=s",
    "problem page": lambda w, k: f"/problems/{w.problems[0].pk}/",
    "problems list": lambda w, k: "/problems/",
    "model page": lambda w, k: f"/models/{w.model.slug}/",
    "kernel page": lambda w, k: f"/kernels/{k.pk}/",
    "run page": lambda w, k: f"/runs/{w.run.pk}/",
    "search": lambda w, k: "/search/?q=P",
    "api runs": lambda w, k: "/api/v1/runs/",
    "api run": lambda w, k: f"/api/v1/runs/{w.run.pk}/",
    "api run scores": lambda w, k: f"/api/v1/runs/{w.run.pk}/scores/",
    "api run problems": lambda w, k: f"/api/v1/runs/{w.run.pk}/problems/",
    "api leaderboard": lambda w, k: "/api/v1/leaderboard/?level=1&set=s",
    "api problems": lambda w, k: "/api/v1/problems/",
    "api kernels": lambda w, k: "/api/v1/kernels/",
}


def _correct_on_level_1(world) -> int:
    return RunScore.objects.get(run=world.run, level=1, with_excluded=False).s0_correct


@pytest.fixture
def stale(world) -> Kernel:
    """A scored run, then a second kernel whose result is stored but not yet re-scored (its mark waits)."""
    world.kernel(world.problems[0], speedup=2.0)
    run_rescorer()
    kernel = world.kernel(world.problems[1], speedup=3.0)
    assert DirtyRun.objects.filter(run_id=world.run.pk).exists()
    return kernel


@pytest.mark.parametrize("read", READS)
def test_a_read_writes_nothing_while_a_mark_waits(world, stale, client, read):
    path = READS[read](world, stale)
    with CaptureQueriesContext(connection) as queries:
        assert client.get(path).status_code == 200, path
    assert _writes(queries) == [], path
    assert DirtyRun.objects.filter(run_id=world.run.pk).exists()


def test_a_stale_mark_stays_until_the_rescorer_takes_it(world, stale, client):
    before = client.get("/api/v1/leaderboard/?level=1&set=s").json()
    assert DirtyRun.objects.filter(run_id=world.run.pk).exists()
    assert _correct_on_level_1(world) == 1  # the stored rows as they were: the new result not in them
    assert run_rescorer() == 1
    assert not DirtyRun.objects.exists()
    assert _correct_on_level_1(world) == 2
    after = client.get("/api/v1/leaderboard/?level=1&set=s").json()
    assert before != after


@pytest.mark.django_db(transaction=True)  # committed marks, outside any transaction, as on a live site
def test_reads_leave_even_a_lost_mark_to_the_rescorer(world, client, settings):
    settings.BOARD_RESCORER = True  # writers only mark
    kernel = world.kernel(world.problems[0], speedup=2.0)
    lost = timezone.now() - timedelta(seconds=settings.BOARD_FRESHNESS_SECONDS + 60)
    DirtyRun.objects.update(marked_at=lost)  # a re-scorer that died with it
    for read in READS.values():
        path = read(world, kernel)
        with CaptureQueriesContext(connection) as queries:
            assert client.get(path).status_code == 200, path
        assert _writes(queries) == [], path
    assert DirtyRun.objects.filter(run_id=world.run.pk).exists()
    assert run_rescorer() == 1 and not DirtyRun.objects.exists()
