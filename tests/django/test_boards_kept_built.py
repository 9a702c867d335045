"""The background re-scorer keeps the standard boards built (leaderboard/ops/kept_boards.py): after
its sweep, a first visit to any of them is served from a kept build, reading no score row."""

from __future__ import annotations

import threading
import time

import pytest
from django.core.cache import cache
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from leaderboard.boards import rescorer
from leaderboard.models import RunScore
from leaderboard.ops import kept_boards as kept
from leaderboard.reads.board import featured, served
from tests.pagekit import make_run, make_set, plain_static  # noqa: F401
from tests.rescoring import run_rescorer

pytestmark = pytest.mark.django_db


@pytest.fixture
def site():
    problem_set = make_set("KernelBench v0.1", levels=(1, 1, 2))
    make_run(problem_set)
    run_rescorer()  # as the re-scorer does between its sweeps
    cache.clear()
    yield problem_set
    cache.clear()


def _reads_scores(client: Client, path: str) -> bool:
    with CaptureQueriesContext(connection) as queries:
        assert client.get(path).status_code == 200
    return any(RunScore._meta.db_table in query["sql"] for query in queries.captured_queries)


def test_the_standard_boards_name_every_level_rule_download_grid_and_api_board(site):
    paths = kept.standard_paths()
    assert "/" in paths and "/levels/3/?rule=best&export=csv" in paths and "/levels/4/grid/" in paths
    assert "/api/v1/leaderboard/?set=kernelbench-v0.1&level=2&rule=best" in paths


def test_after_a_sweep_a_first_visit_to_a_standard_board_builds_nothing(site, client):
    assert _reads_scores(client, "/levels/2/?export=csv")  # nothing kept yet: this visit builds it
    cache.clear()
    kept.sweep(budget=600)
    for path in ("/levels/2/?export=csv", "/levels/all/?rule=best", "/api/v1/leaderboard/?level=1"):
        assert not _reads_scores(client, path), path


def test_a_sweep_out_of_time_goes_on_where_it_stopped(site):
    paths = kept.standard_paths()
    assert kept.sweep(start=3, budget=0) == 4
    assert kept.sweep(start=len(paths) - 1, budget=0) == 0


def test_a_sweep_rebuilds_a_stale_board_unless_the_rescorer_is_behind(site, client, monkeypatch):
    monkeypatch.setattr(kept, "standard_paths", lambda: ["/levels/1/?export=csv"])
    monkeypatch.setattr(served, "KEEP_STALE_SECONDS", 0)  # any write it lacks is old enough
    kept.sweep()
    make_run(site)  # a write the kept build lacks
    run_rescorer()
    kept.sweep(rebuild_stale=False)
    assert _reads_scores(client, "/levels/1/?export=csv")  # still stale: the request rebuilt it
    make_run(site)
    run_rescorer()
    kept.sweep()
    assert not _reads_scores(client, "/levels/1/?export=csv")


def test_a_sweep_counts_the_runs_only_when_no_featured_set_is_kept(site, monkeypatch):
    monkeypatch.setattr(kept, "standard_paths", lambda: [])
    counted = []
    monkeypatch.setattr(featured, "rank_featured", lambda real=featured.rank_featured: counted.append(1) or real())
    kept.sweep()  # nothing kept (the fixture emptied the cache): counted and kept
    kept.sweep()  # kept: writes renew it, the sweep reads it
    assert counted == [1]
    featured.forget_featured()
    kept.sweep()
    assert counted == [1, 1]


def test_the_rescorer_sweeps_with_what_its_command_hands_it(monkeypatch):
    seen = []
    sweeps = rescorer.Sweeps(every=1.0, sweep=lambda start, rebuild: seen.append((start, rebuild)) or start + 5)
    sweeps.when_due(behind=True)
    sweeps.when_due(behind=False)  # not yet due
    assert seen == [(0, False)] and sweeps.cursor == 5
    idle = rescorer.Sweeps(every=1.0, sweep=None)
    idle.when_due(behind=False)
    assert idle.cursor == 0


def test_the_rescorer_loop_sweeps_in_a_thread_of_its_own_and_never_waits_for_it():
    """A sweep builds boards for seconds (7 s a board at 13 M once): the loop's next pass must not
    wait for it, nor a second sweep start while one runs."""
    release, started = threading.Event(), []

    def slow_sweep(start: int, rebuild: bool) -> int:
        started.append(start)
        release.wait(5)
        return start + 1

    sweeps = rescorer.Sweeps(every=0.001, sweep=slow_sweep, in_thread=True)
    began = time.monotonic()
    sweeps.when_due(behind=False)
    time.sleep(0.01)
    sweeps.when_due(behind=False)  # due again, but the first still runs: not a second one
    assert time.monotonic() - began < 1 and started == [0]
    release.set()
    sweeps.thread.join(5)
    assert sweeps.cursor == 1
