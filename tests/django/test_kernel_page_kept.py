"""What the kernel page keeps between visits: its highlighted source and diffs (by the texts they are
made of), its problem's list of kernels (by its set's board version); and what it no longer reads
for a kernel the review queue does not list."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from leaderboard.models import Kernel
from leaderboard.reads import diffs
from leaderboard.reviews import services as reviews
from tests.pagekit import evaluate, make_model, make_run, make_set, plain_static  # noqa: F401
from tests.rescoring import run_rescorer

pytestmark = pytest.mark.django_db


def test_a_diff_is_made_once_for_the_same_texts(monkeypatch):
    first = diffs.compute_diff("a\nb\n", "a\nc\n", "left", "right")
    monkeypatch.setattr(diffs, "_diff", lambda *args: pytest.fail("made again"))
    assert diffs.compute_diff("a\nb\n", "a\nc\n", "left", "right") == first


def test_a_changed_text_is_diffed_anew():
    assert diffs.compute_diff("a\nb\n", "a\nc\n", "l", "r").removed == 1
    assert diffs.compute_diff("a\nc\n", "a\nc\n", "l", "r").identical  # an edited reference: its own key
    assert diffs.compute_diff("a\nb\n", "a\nc\n", "l", "other label").right_label == "other label"


def test_a_kept_highlighting_of_hostile_source_stays_escaped():
    source = "x = '</pre><script>alert(1)</script>'\n"
    for _ in range(2):  # made, then read back from the cache
        html = diffs.highlight_python(source, anchor="k")
        assert "<script>" not in html and "&lt;/" in html


def kernels_of_problem(client, kernel: Kernel) -> int:
    """Queries of a visit to `kernel`'s page that list its problem's kernels (the compare list)."""
    with CaptureQueriesContext(connection) as context:
        assert client.get(kernel.get_absolute_url()).status_code == 200
    listing = f'WHERE "leaderboard_kernel"."problem_id" = {kernel.problem_id}'
    return sum(listing in query["sql"] for query in context.captured_queries)


def test_the_compare_list_is_kept_until_the_problem_set_is_rescored(client):
    problem_set = make_set(levels=(1,))
    mine = Kernel.objects.get(run=make_run(problem_set, [1.2], model=make_model("Mine")))
    other = Kernel.objects.get(run=make_run(problem_set, [2.4], model=make_model("Other")))
    run_rescorer()
    assert kernels_of_problem(client, mine) == 1
    assert kernels_of_problem(client, mine) == 0  # kept
    evaluate(other, 3.6)
    run_rescorer()
    assert kernels_of_problem(client, mine) == 1
    assert (
        f">kernel {other.pk} · Other · 3.60x (fastest)</option>" in client.get(mine.get_absolute_url()).content.decode()
    )


def test_a_kernel_out_of_the_queue_costs_no_reading_of_the_review_rules(client):
    kernel = Kernel.objects.get(run=make_run(make_set(levels=(1,)), [1.2]))
    run_rescorer()
    assert not kernel.review_pending
    with CaptureQueriesContext(connection) as context:
        client.get(kernel.get_absolute_url())
    assert not any('"needs_review"' in query["sql"] for query in context.captured_queries)


def test_the_queue_count_is_named_by_its_filters_not_its_sort():
    key = reviews.queue_count_key
    assert key(reviews.QueueFilters(sort="date")) == key(reviews.QueueFilters(sort="speedup"))
    assert key(reviews.QueueFilters(level=1)) != key(reviews.QueueFilters(level=2))
    assert key(reviews.QueueFilters(model="a")) != key(reviews.QueueFilters(flag="a"))
