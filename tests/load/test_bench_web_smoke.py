"""The web benchmark's smoke test (issue 13): the dataset at SCALE=20k, generated through the
models, then every page and API endpoint of the benchmark once, asserting query counts (bounded
whatever the data size), not times. The timings come from `make bench-web` (docs/performance.md)."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command

from benchmarks.web import actions
from leaderboard.models import Kernel, RunScore

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _plain_static_files(settings) -> None:
    settings.STORAGES = {
        **settings.STORAGES,
        "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    }


def test_every_benchmarked_page_answers_in_bounded_queries_at_20k():
    actions.main(["generate", "--scale", "20k"], out=io.StringIO())
    assert 19_000 < Kernel.objects.count() < 21_000 and RunScore.objects.exists()
    out = io.StringIO()
    actions.main(["queries", "--check"], out=out)  # exits when a URL is over the bound
    counts = [int(line.split()[0]) for line in out.getvalue().splitlines()]
    assert len(counts) >= 20 and max(counts) <= actions.QUERY_BOUND
    call_command("rebuild_boards", "--verify-only", stdout=io.StringIO())


def test_the_marks_action_says_what_waits_for_the_rescorer(tmp_path):
    stop = tmp_path / "stop"
    stop.touch()  # the writers stopped already: no sample while writing, only the drain
    out = io.StringIO()
    actions.main(["marks", "--stop-file", str(stop), "--seconds", "1"], out=out)
    lines = out.getvalue().splitlines()
    assert lines[0] == "when the writers stopped: 0 runs marked, the oldest for 0.0 s"
    assert lines[1].startswith("all re-scored ")
