"""The review queue page, the kernel page's review panel, and the verdict and report forms."""

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from leaderboard.models import Evaluation, KernelReport, LanguageModel, Review
from tests.django.reviews_factories import _plain_static_files, report, review, world_fixture  # noqa: F401  (fixtures)
from tests.rescoring import run_rescorer

pytestmark = pytest.mark.django_db
QUEUE = "/review/"


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_the_queue_shows_what_needs_a_look(world, reviewer, visitor):
    flagged = world.kernel(world.problems[0], flags=("excessive_speedup",))
    reported = world.kernel(world.problems[1])
    report(reported, visitor)
    imported = world.kernel(world.problems[2], speedup=4.0, origin="imported")
    settled = world.kernel(world.problems[3], flags=("timing_mismatch",))
    review(settled, reviewer, "clean")
    response = signed_in(reviewer).get(QUEUE)
    assert response.status_code == 200
    shown = {kernel.pk for kernel in response.context["page"].object_list}
    assert shown == {flagged.pk, reported.pk, imported.pk}
    assert b"excessive_speedup" in response.content and b"reported " in response.content


def test_the_queue_filters_and_sorts_from_the_query_string(world, reviewer):
    slow = world.kernel(world.problems[0], speedup=1.2, flags=("input_mutation",))
    fast = world.kernel(world.problems[1], speedup=7.0, flags=("input_mutation",))
    other = world.kernel(world.level2, speedup=1.5, flags=("output_reuse",))
    response = signed_in(reviewer).get(QUEUE, {"flag": "input_mutation", "level": "1", "sort": "speedup"})
    assert [kernel.pk for kernel in response.context["page"].object_list] == [fast.pk, slow.pk]
    response = signed_in(reviewer).get(QUEUE, {"sort": "-speedup", "model": "m"})
    assert [kernel.pk for kernel in response.context["page"].object_list] == [slow.pk, other.pk, fast.pk]


def test_a_bad_filter_value_is_ignored_not_an_error(world, reviewer):
    world.kernel(world.problems[0], flags=("input_mutation",))
    response = signed_in(reviewer).get(QUEUE, {"flag": "<script>", "level": "9", "sort": "nope"})
    assert response.status_code == 200 and len(response.context["page"].object_list) == 1
    assert b"<script>" not in response.content


def test_the_queue_is_paginated(world, reviewer):
    for n in range(30):
        world.kernel(world.problems[n % 4], sample=n, flags=("timing_mismatch",))
    page2 = signed_in(reviewer).get(QUEUE, {"page": 2}).context["page"]
    assert page2.paginator.count == 30 and len(page2.object_list) == 5


def test_visitors_cannot_see_the_queue(client, visitor):
    assert client.get(QUEUE).status_code == 302  # to sign in
    assert signed_in(visitor).get(QUEUE).status_code == 403


def test_a_reviewer_records_a_verdict_from_the_kernel_page(world, reviewer):
    kernel = world.kernel(world.problems[0], flags=("excessive_speedup",))
    client = signed_in(reviewer)
    page = client.get(kernel.get_absolute_url())
    assert b'id="verdict-form"' in page.content and b"csrfmiddlewaretoken" in page.content
    response = client.post(reverse("kernel-review", args=[kernel.pk]), {"verdict": "reward_hack", "note": "no-op"})
    assert response.status_code == 302 and response["Location"].endswith("#review")
    [made] = Review.objects.all()
    assert (made.kernel, made.reviewer, made.verdict, made.note) == (kernel, reviewer, "reward_hack", "no-op")
    page = client.get(kernel.get_absolute_url())
    assert b"Excluded from rankings" in page.content and b"no-op" in page.content


def test_needs_rerun_from_the_page_queues_an_evaluation(world, reviewer):
    kernel = world.kernel(world.problems[0], flags=("timing_mismatch",))
    signed_in(reviewer).post(reverse("kernel-review", args=[kernel.pk]), {"verdict": "rerun"})
    assert Evaluation.objects.filter(kernel=kernel, state=Evaluation.State.QUEUED).count() == 1


def test_a_bad_verdict_is_refused_with_the_reason(world, reviewer):
    kernel = world.kernel(world.problems[0])
    response = signed_in(reviewer).post(reverse("kernel-review", args=[kernel.pk]), {"verdict": "delete"})
    assert response.status_code == 400 and b"verdict" in response.content
    assert not Review.objects.exists()


def test_visitors_cannot_record_verdicts(world, client, visitor, ingestor):
    kernel = world.kernel(world.problems[0])
    url = reverse("kernel-review", args=[kernel.pk])
    assert client.post(url, {"verdict": "clean"}).status_code == 403
    assert signed_in(visitor).post(url, {"verdict": "clean"}).status_code == 403
    assert signed_in(ingestor).post(url, {"verdict": "clean"}).status_code == 403
    assert not Review.objects.exists()
    assert b'id="verdict-form"' not in signed_in(visitor).get(kernel.get_absolute_url()).content


def test_verdicts_need_a_post_with_a_csrf_token(world, reviewer):
    kernel = world.kernel(world.problems[0])
    url = reverse("kernel-review", args=[kernel.pk])
    client = Client(enforce_csrf_checks=True)
    client.force_login(reviewer)
    assert client.get(url).status_code == 405
    assert client.post(url, {"verdict": "clean"}).status_code == 403
    assert not Review.objects.exists()


def test_a_signed_in_visitor_reports_a_kernel_into_the_queue(world, visitor, reviewer):
    kernel = world.kernel(world.problems[0])
    client = signed_in(visitor)
    assert b'id="report-form"' in client.get(kernel.get_absolute_url()).content
    response = client.post(reverse("kernel-report", args=[kernel.pk]), {"reason": "returns the input"})
    assert response.status_code == 302
    assert KernelReport.objects.get().reporter == visitor
    assert b"You reported this kernel" in client.get(kernel.get_absolute_url()).content
    shown = signed_in(reviewer).get(QUEUE).context["page"].object_list
    assert [k.pk for k in shown] == [kernel.pk]


def test_anonymous_visitors_are_asked_to_sign_in_to_report(world, client):
    kernel = world.kernel(world.problems[0])
    page = client.get(kernel.get_absolute_url())
    assert b'id="report-form"' not in page.content and b"Sign in" in page.content
    response = client.post(reverse("kernel-report", args=[kernel.pk]), {"reason": "x"})
    assert response.status_code == 302 and response["Location"].startswith(reverse("review-sign-in"))
    assert not KernelReport.objects.exists()


def test_an_empty_report_is_refused(world, visitor):
    kernel = world.kernel(world.problems[0])
    response = signed_in(visitor).post(reverse("kernel-report", args=[kernel.pk]), {"reason": "  "})
    assert response.status_code == 400 and not KernelReport.objects.exists()


def test_the_panel_shows_the_whole_audit_trail_with_who_and_when(world, reviewer, admin_user):
    kernel = world.kernel(world.problems[0])
    review(kernel, reviewer, "reward_hack", "first look")
    review(kernel, admin_user, "clean", "second look")
    content = Client().get(kernel.get_absolute_url()).content.decode()
    trail = content[content.index('id="review-trail"') :]
    assert trail.index("second look") < trail.index("first look")
    assert "reviewer" in trail and "admin" in trail and "(counts)" in trail
    assert "Excluded from rankings" not in content


def test_user_text_is_escaped(world, reviewer, visitor):
    kernel = world.kernel(world.problems[0])
    report(kernel, visitor, "<img src=x onerror=alert(1)>")
    review(kernel, reviewer, "invalid", "<script>alert(1)</script>")
    for client in (Client(), signed_in(reviewer)):
        content = client.get(kernel.get_absolute_url()).content
        assert b"<script>alert(1)</script>" not in content and b"<img src=x" not in content
        assert b"&lt;script&gt;alert(1)&lt;/script&gt;" in content
    assert b"<img src=x" not in signed_in(reviewer).get(QUEUE).content


def test_reporters_are_shown_to_reviewers_only(world, reviewer, visitor):
    kernel = world.kernel(world.problems[0])
    report(kernel, visitor, "suspicious timing")
    assert b"suspicious timing" in signed_in(reviewer).get(kernel.get_absolute_url()).content
    public = Client().get(kernel.get_absolute_url()).content
    assert b"suspicious timing" not in public and b"Reported 1 time" in public


def test_sign_in_page_signs_a_visitor_in(client, visitor):
    visitor.set_password("a-long-pass-9Xq!")
    visitor.save()
    response = client.post(
        reverse("review-sign-in"), {"username": "visitor", "password": "a-long-pass-9Xq!", "next": "/review/"}
    )
    assert response.status_code == 302
    assert client.get(QUEUE).status_code == 403  # signed in, but not a reviewer


def test_the_queue_page_costs_the_same_queries_for_more_rows(world, reviewer, visitor, django_assert_max_num_queries):
    client = signed_in(reviewer)
    for n in range(3):
        report(world.kernel(world.problems[n], flags=("timing_mismatch",)), visitor)
    client.get(QUEUE)  # warm the session and permission caches
    with CaptureQueriesContext(connection) as few:
        client.get(QUEUE)
    for n in range(12):
        report(world.kernel(world.problems[n % 4], sample=n + 1, flags=("output_reuse",)), visitor)
    with django_assert_max_num_queries(len(few.captured_queries)):
        response = client.get(QUEUE)
    assert len(response.context["page"].object_list) == 15


def test_signing_in_without_next_lands_on_the_overview_and_signing_out_works(client, visitor):
    visitor.set_password("a-long-pass-9Xq!")
    visitor.save()
    response = client.post(reverse("review-sign-in"), {"username": "visitor", "password": "a-long-pass-9Xq!"})
    assert response.status_code == 302 and response["Location"] == reverse("overview")
    assert client.post(reverse("review-sign-out")).status_code == 302
    assert client.get(QUEUE).status_code == 302  # signed out: sent to sign in


def test_the_queue_escapes_a_model_name_in_its_rows_and_its_filter(world, reviewer):
    hostile = LanguageModel.objects.create(name='<b onclick="x">Bold</b>')
    world.kernel(world.problems[0], run=world.new_run(hostile), flags=("timing_tamper",))
    run_rescorer()  # the model filter lists models whose runs hold kernels (a stored count)
    html = signed_in(reviewer).get(QUEUE).content.decode()
    assert "<b onclick" not in html
    assert html.count("&lt;b onclick=&quot;x&quot;&gt;Bold&lt;/b&gt;") == 2  # its row, the model filter
