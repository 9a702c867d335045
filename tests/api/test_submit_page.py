"""The problem page's submission form (URL name problem-submit): the same rules as the API."""

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from leaderboard.models import Evaluation, Kernel

from .conftest import KERNEL


@pytest.fixture
def url(problem_set):
    return reverse("problem-submit", args=[problem_set.problems.get(level=1, number=1).pk])


def test_a_signed_in_ingestor_submits_through_the_form(client, ingestor, url, hardware, model):
    client.force_login(ingestor)
    assert client.get(url).status_code == 200
    response = client.post(url, {"source": KERNEL, "hardware": "cpu", "model": "model-a"})
    kernel = Kernel.objects.get()
    assert response.status_code == 302 and response["Location"] == kernel.get_absolute_url()
    assert Evaluation.objects.get().state == "queued" and kernel.submitted_by == ingestor


def test_a_file_can_be_uploaded_instead(client, ingestor, url, hardware, model):
    client.force_login(ingestor)
    upload = SimpleUploadedFile("k.py", KERNEL.encode())
    assert client.post(url, {"source_file": upload, "hardware": "cpu", "model": "model-a"}).status_code == 302


def test_bad_input_shows_the_form_again_with_the_reason(client, ingestor, url, hardware, model):
    client.force_login(ingestor)
    response = client.post(url, {"source": "print(1)", "hardware": "cpu", "model": "model-a"})
    assert response.status_code == 400 and "class ModelNew" in response.content.decode()
    response = client.post(
        url, {"source_file": SimpleUploadedFile("k.py", b"\xff\xfe"), "model": "model-a", "hardware": "cpu"}
    )
    assert response.status_code == 400 and "not UTF-8" in response.content.decode()
    assert Kernel.objects.count() == 0


def test_visitors_are_sent_to_sign_in_and_users_without_permission_get_403(client, visitor, url):
    assert client.get(url).status_code == 302
    client.force_login(visitor)
    assert client.post(url, {"source": KERNEL}).status_code == 403


def test_the_form_needs_csrf(ingestor, url, hardware, model):
    from django.test import Client

    client = Client(enforce_csrf_checks=True)
    client.force_login(ingestor)
    assert client.post(url, {"source": KERNEL, "hardware": "cpu", "model": "model-a"}).status_code == 403


def test_an_unknown_problem_is_404(client, ingestor, db):
    client.force_login(ingestor)
    assert client.get(reverse("problem-submit", args=[99999])).status_code == 404
