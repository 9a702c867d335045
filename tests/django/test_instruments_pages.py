"""The reviewer's instruments on the site: stored with the Evaluation by the worker's store, shown on
the kernel page and in the API (public less the kernel's own text), and the review queue sorting and
filtering by them."""

from __future__ import annotations

import copy

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from leaderboard.evaluations.attempts import claim, store_result
from leaderboard.models import Evaluation, Kernel
from leaderboard.reads import disclosure
from leaderboard.reads.instruments import instrument_views
from leaderboard.reviews import services as reviews
from tests.django.reviews_factories import _plain_static_files, world_fixture  # noqa: F401  (fixtures)

pytestmark = pytest.mark.django_db
QUEUE = "/review/"


def record(sol: float = 0.4, ratio: float = 1.2, worst: float = 0.1, busy: float = 0.9) -> dict:
    """An instruments record as evaluation/instruments/ writes it (figures made up)."""
    return {
        "tolerance": {"worst_ratio": worst, "margin": 1 - worst, "trials": 5, "extra_trials": 0, "near": worst >= 0.5},
        "precision": {
            "kernel_rel_l2": 1e-7 * ratio,
            "reference_rel_l2": 1e-7,
            "kernel_max_abs": 1e-5,
            "reference_max_abs": 1e-5,
            "ratio": ratio,
            "downgrade": ratio >= 16,
        },
        "determinism": {"runs": 2, "identical": True, "max_abs_diff": [1e-6, 1e-6], "correct": [True, True]},
        "shapes": {
            "sizes": {"N": 128},
            "specialised": False,
            "variants": [
                {
                    "label": "halved",
                    "sizes": {"N": 64},
                    "verdict": "failed",
                    "detail": "its forward failed (runtime_error)",
                    "error": "RuntimeError: <secret from /etc/passwd>",
                }
            ],
        },
        "speed_of_light": {
            "bytes": 3 * 2**26,
            "flops": 2 * 4096**3,
            "peaks": {"bytes_per_s": 4.8e12, "flops_per_s": 989.4e12},
            "sol_ms": 0.139,
            "bound": "compute",
            "kernel_fraction": sol,
            "reference_fraction": 0.1,
            "impossible": sol > 1,
            "flops_by_op": {"aten.mm": 2 * 4096**3},
        },
        "profile": {
            "device": "cuda",
            "kernel": {
                "activities": 1,
                "span_us": 50.0,
                "busy_us": 50.0 * busy,
                "busy_share": busy,
                "gaps": {"count": 0, "total_us": 0.0, "max_us": 0.0},
                "events": [{"name": "<b>leaked_name</b>", "kind": "kernel", "us": 50.0, "start_us": 0.0}],
            },
            "reference": {
                "activities": 1,
                "span_us": 60.0,
                "busy_us": 60.0,
                "busy_share": 1.0,
                "gaps": {"count": 0, "total_us": 0.0, "max_us": 0.0},
                "events": [{"name": "sm90_xmma_gemm", "kind": "kernel", "us": 60.0, "start_us": 0.0}],
            },
        },
    }


def kernel_with(world, problem, instruments: dict, flags: tuple[str, ...] = ("excessive_speedup",)):
    kernel = world.kernel(problem, flags=flags)
    Evaluation.objects.filter(pk=kernel.latest_evaluation_id).update(instruments=instruments)
    return kernel


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_the_kernel_page_shows_each_instrument_and_withholds_the_kernels_own_text(world, client, reviewer):
    kernel = kernel_with(world, world.problems[0], record(sol=1.7), flags=("impossible_speed",))
    page = client.get(kernel.get_absolute_url()).content.decode()
    for title in (
        "Precision used",
        "Other shapes",
        "Determinism",
        "Speed of light",
        "Profile (one forward)",
        "Tolerance margin",
    ):
        assert title in page
    assert "170.0% of it" in page and "sm90_xmma_gemm" in page
    assert "leaked_name" not in page and "/etc/passwd" not in page and disclosure.WITHHELD_NAME in page
    as_reviewer = signed_in(reviewer).get(kernel.get_absolute_url()).content.decode()
    assert "&lt;b&gt;leaked_name&lt;/b&gt;" in as_reviewer and "<b>leaked_name" not in as_reviewer  # escaped


def test_the_api_detail_carries_the_instruments_public_less_the_kernels_text(world, client, reviewer):
    kernel = kernel_with(world, world.problems[0], record())
    url = f"/api/v1/evaluations/{kernel.latest_evaluation_id}/"
    public = client.get(url).json()["instruments"]
    assert public["speed_of_light"]["kernel_fraction"] == 0.4
    assert "error" not in public["shapes"]["variants"][0]
    assert public["profile"]["kernel"]["events"][0]["name"] == disclosure.WITHHELD_NAME
    full = signed_in(reviewer).get(url).json()["instruments"]
    assert full["shapes"]["variants"][0]["error"].startswith("RuntimeError")


@pytest.mark.parametrize(
    ("sort", "field", "highest_first"),
    [("sol", "sol", True), ("precision", "ratio", True), ("margin", "worst", True), ("busy", "busy", False)],
)
def test_the_queue_sorts_by_each_instrument(world, reviewer, sort, field, highest_first):
    low = kernel_with(world, world.problems[0], record(**{field: 0.2}))
    high = kernel_with(world, world.problems[1], record(**{field: 0.9}))
    unmeasured = world.kernel(world.problems[2], flags=("excessive_speedup",))  # no instruments: last
    order = [k.pk for k in reviews.review_queue(reviews.QueueFilters(sort=sort))]
    expected = [high.pk, low.pk] if highest_first else [low.pk, high.pk]
    assert order == [*expected, unmeasured.pk]
    response = signed_in(reviewer).get(QUEUE, {"sort": sort})
    assert [k.pk for k in response.context["page"].object_list] == [*expected, unmeasured.pk]
    api = signed_in(reviewer).get("/api/v1/review-queue/", {"sort": sort}).json()["results"]
    assert [row["kernel"] for row in api] == [*expected, unmeasured.pk]
    assert api[-1]["instruments"][sort] is None and api[0]["instruments"][sort] in (0.2, 0.9)


def test_the_queue_filters_by_each_instruments_flag(world, reviewer):
    flagged = {
        code: kernel_with(world, world.problems[i], record(), flags=(code,))
        for i, code in enumerate(("impossible_speed", "precision_downgrade", "shape_specialised", "nondeterministic"))
    }
    flagged["near_tolerance"] = kernel_with(world, world.level2, record(worst=0.8), flags=("near_tolerance",))
    client = signed_in(reviewer)
    for code, kernel in flagged.items():
        response = client.get(QUEUE, {"flag": code})
        assert [k.pk for k in response.context["page"].object_list] == [kernel.pk], code
    page = client.get(QUEUE, {"sort": "margin"}).content.decode()
    assert 'data-figure="margin">80%' in page and 'data-figure="sol">40%' in page


def test_an_impossible_speed_sends_a_kernel_to_review_whatever_else_it_passed(world):
    kernel = world.kernel(world.problems[0], flags=("impossible_speed",))
    assert kernel.pk in {k.pk for k in reviews.review_queue()}


def test_an_evaluation_without_instruments_shows_none():
    assert instrument_views({}) == [] and instrument_views(None) == []
    skipped = instrument_views({"precision": {"skipped": "the run's precision is fp16"}})
    assert skipped[0].summary == "not measured: the run's precision is fp16" and skipped[0].details == []
    crashed = instrument_views({"determinism": {"skipped": "ended early: crashed", "error": "signal SIGSEGV"}})
    assert crashed[0].summary == "not measured: ended early: crashed" and crashed[0].details == [
        ("error", "signal SIGSEGV")
    ]


def test_public_instruments_leave_the_stored_record_alone():
    stored = record()
    before = copy.deepcopy(stored)
    disclosure.public_instruments(stored)
    assert stored == before


def test_the_worker_stores_the_instruments_with_the_evaluation(world):
    kernel = world.kernel(world.problems[0])
    queued = Evaluation.objects.create(kernel=kernel, hardware=world.hardware)
    stored = record(sol=0.5)
    assert store_result(
        claim(queued.pk, "host.1"),
        {"status": "correct", "correct": True, "compiled": True, "speedup": 2.0, "instruments": stored},
    )
    queued.refresh_from_db()
    assert queued.instruments == stored


def test_figures_that_are_not_numbers_sort_last_and_break_no_page(world, client, reviewer):
    """A record stored before the parent rebuilt the kernel's profile (evaluation.instruments.sanitize)
    may hold anything where the busy share goes: the sort's cast must not fail (PostgreSQL would)."""
    good = kernel_with(world, world.problems[0], record(busy=0.5))
    hostile = []
    for i, value in enumerate(("x", True, {"a": [1]}, 10**400, "<b>0.1</b>")):
        stored = record()
        stored["profile"]["kernel"].update(busy_share=value, kind="<i>", gaps=[1], events="many")
        stored["precision"]["modes_changed"] = ["not", "a", "dict"]
        kernel = world.kernel(world.problems[1], sample=i, flags=("excessive_speedup",))
        Evaluation.objects.filter(pk=kernel.latest_evaluation_id).update(instruments=stored)
        hostile.append(kernel.pk)
    order = [k.pk for k in reviews.review_queue(reviews.QueueFilters(sort="busy"))]
    assert order[0] == good.pk and set(order[1:]) == set(hostile)
    as_reviewer = signed_in(reviewer)
    assert as_reviewer.get(QUEUE, {"sort": "busy"}).status_code == 200
    api = as_reviewer.get("/api/v1/review-queue/", {"sort": "busy"})
    assert api.status_code == 200 and [row["instruments"]["busy"] for row in api.json()["results"]][:2] == [0.5, None]
    kernel = Kernel.objects.get(pk=hostile[0])
    for reader in (client, as_reviewer):
        assert reader.get(kernel.get_absolute_url()).status_code == 200
    public = client.get(f"/api/v1/evaluations/{kernel.latest_evaluation_id}/").json()["instruments"]
    assert public["profile"]["kernel"]["busy_share"] is None and public["precision"]["modes_changed"] == {}
    assert "kind" not in public["profile"]["kernel"] and public["profile"]["kernel"]["events"] == []


def test_the_evaluation_list_does_not_load_the_instruments(world, client):
    kernel_with(world, world.problems[0], record())
    with CaptureQueriesContext(connection) as queries:
        assert client.get("/api/v1/evaluations/").status_code == 200
    selects = [q["sql"] for q in queries.captured_queries if "leaderboard_evaluation" in q["sql"]]
    assert selects and not any('"instruments"' in sql for sql in selects)
