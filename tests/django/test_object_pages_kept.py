"""A kernel's and a run's page (for anonymous visitors) and the review queue (for reviewers) kept
rendered while their signature holds (leaderboard/reads/kept_pages.py): read in one query, never
served once anything they show has changed, never kept with anything of one visitor in it."""

import pytest
from django.contrib import messages
from django.contrib.auth.models import User
from django.contrib.messages.storage.cookie import CookieStorage
from django.http import HttpResponse
from django.test import Client, RequestFactory

from leaderboard.models import Evaluation, Kernel
from leaderboard.reviews import services as reviews
from tests.django.reviews_factories import report, review
from tests.pagekit import count_queries, evaluate, make_model, make_run, make_set, plain_static  # noqa: F401
from tests.rescoring import run_rescorer

# Committed writes, as a site makes them: a test's one transaction would mark each run once.
pytestmark = pytest.mark.django_db(transaction=True)
QUEUE = "/review/"


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def kernels():
    """Three scored kernels of one run."""
    run = make_run(make_set(levels=(1, 1, 2)), [1.5, 2.0, None], model=make_model("Keeper"))
    run_rescorer()
    return list(Kernel.objects.filter(run=run).order_by("pk"))


def test_a_kernel_page_is_read_in_one_query_once_kept(client, kernels):
    url = kernels[0].get_absolute_url()
    first = client.get(url).content
    assert count_queries(client, url) == 1  # the signature
    assert client.get(url).content == first


def test_a_run_page_is_read_in_one_query_once_kept(client, kernels):
    url = kernels[0].run.get_absolute_url()
    first = client.get(url).content
    assert count_queries(client, url) == 1
    assert client.get(url).content == first


def test_a_queued_evaluation_shows_at_once_and_its_page_follows_it_until_it_is_scored(client, kernels):
    kernel = kernels[0]
    client.get(kernel.get_absolute_url())
    queued = Evaluation.objects.create(kernel=kernel, hardware=kernel.run.hardware)  # no mark: not scored yet
    for url in (kernel.get_absolute_url(), kernel.run.get_absolute_url()):
        assert count_queries(client, url) > 1, url  # pending: rendered each time, not kept
    assert f"<td>{queued.pk}</td>" in client.get(kernel.get_absolute_url()).content.decode()
    queued.delete()
    evaluate(kernel, 9.5)
    run_rescorer()
    assert "9.50x" in client.get(kernel.get_absolute_url()).content.decode()
    assert count_queries(client, kernel.get_absolute_url()) == 1  # kept again


def test_a_verdict_shows_on_the_kernel_page_before_and_after_its_rescoring(client, kernels, reviewer):
    kernel = kernels[1]
    client.get(kernel.get_absolute_url())
    review(kernel, reviewer, "reward_hack", note="times a constant")
    assert "times a constant" in client.get(kernel.get_absolute_url()).content.decode()  # marked, waiting
    run_rescorer()
    assert "times a constant" in client.get(kernel.get_absolute_url()).content.decode()


def test_a_signed_in_visitors_page_is_never_kept_for_anonymous_visitors(client, kernels, reviewer):
    kernel = kernels[0]
    as_reviewer = signed_in(reviewer).get(kernel.get_absolute_url()).content.decode()
    assert "csrfmiddlewaretoken" in as_reviewer and "verdict-form" in as_reviewer
    anonymous = client.get(kernel.get_absolute_url()).content.decode()
    assert "csrfmiddlewaretoken" not in anonymous and "verdict-form" not in anonymous
    assert count_queries(signed_in(reviewer), kernel.get_absolute_url()) > 1  # a reviewer's: rendered


def test_one_kept_rendering_for_a_kernel_page_whatever_else_the_query_holds(client, kernels):
    url = kernels[0].get_absolute_url()
    client.get(url + "?utm=1")
    assert count_queries(client, url + "?utm=2") == 1
    assert count_queries(client, url + "?view=unified") > 1  # a parameter it reads: its own


def test_a_message_waiting_for_an_anonymous_visitor_is_shown_not_kept(client, kernels):
    url = kernels[0].get_absolute_url()
    client.get(url)  # kept
    storage = CookieStorage(RequestFactory().get(url))  # where the fallback storage puts one first
    storage.add(messages.INFO, "Signed out; see you soon")
    carrier = HttpResponse()
    storage.update(carrier)
    told = Client()
    told.cookies["messages"] = carrier.cookies["messages"].value
    assert "see you soon" in told.get(url).content.decode()
    assert "see you soon" not in client.get(url).content.decode()


def test_a_missing_kernel_or_run_is_404(client, kernels):
    assert client.get("/kernels/999999/").status_code == 404
    assert client.get("/runs/999999/").status_code == 404
    assert client.get(f"{kernels[0].run.get_absolute_url()}?compare=999999").status_code == 200


def test_the_queue_is_kept_for_every_reviewer_with_their_own_header(kernels, reviewer):
    other = User.objects.create_user("second-reviewer")
    other.groups.add(*reviewer.groups.all())
    report(kernels[0], reviewer)
    run_rescorer()
    first = signed_in(reviewer).get(QUEUE).content.decode()
    assert "reviewer" in first
    second = signed_in(other)
    assert count_queries(second, QUEUE) == 5  # session, user, its two permission reads, signature: no rows
    page = second.get(QUEUE).content.decode()
    assert "second-reviewer" in page and f"/kernels/{kernels[0].pk}/" in page


def test_the_queue_drops_a_kernel_once_judged(kernels, reviewer):
    report(kernels[0], reviewer)
    run_rescorer()
    queue = signed_in(reviewer)
    assert f"/kernels/{kernels[0].pk}/" in queue.get(QUEUE).content.decode()
    reviews.record_verdict(kernels[0], "clean", "", by=reviewer)
    assert f"/kernels/{kernels[0].pk}/" not in queue.get(QUEUE).content.decode()


def test_a_reviewer_renamed_shows_under_the_new_name_on_a_kept_kernel_page(client, kernels):
    kernel, other = kernels[0], kernels[2]
    judge = User.objects.create_user("judge-before")
    review(kernel, judge, "clean", note="fine")
    run_rescorer()
    assert "judge-before" in client.get(kernel.get_absolute_url()).content.decode()
    client.get(other.get_absolute_url())
    judge.last_login = judge.date_joined
    judge.save(update_fields=["last_login"])  # a sign-in: no name changed, nothing marked
    assert count_queries(client, other.get_absolute_url()) == 1  # still kept
    judge.username = "judge-after"
    judge.save()
    page = client.get(kernel.get_absolute_url()).content.decode()
    assert "judge-after" in page and "judge-before" not in page
