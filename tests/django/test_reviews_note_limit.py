"""A verdict's note has one limit (reviews.services.NOTE_MAX_LENGTH) wherever a verdict is entered:
the kernel page's form, POST /api/v1/kernels/<id>/reviews/ and POST /api/v1/reviews/."""

import pytest
from django.core.cache import cache

from leaderboard.models import Review
from leaderboard.reviews.services import NOTE_MAX_LENGTH
from tests.django.reviews_factories import _plain_static_files, world_fixture  # noqa: F401  (fixtures)

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _fresh_throttle():
    cache.clear()
    yield
    cache.clear()


def _post_everywhere(client, api, kernel, note: str) -> list[int]:
    """Status of the same verdict posted through each of the three ways in."""
    return [
        client.post(f"/kernels/{kernel.pk}/review/", {"verdict": "clean", "note": note}).status_code,
        api.post(
            f"/api/v1/kernels/{kernel.pk}/reviews/", {"verdict": "clean", "note": note}, format="json"
        ).status_code,
        api.post(
            "/api/v1/reviews/", {"kernel": kernel.pk, "verdict": "clean", "note": note}, format="json"
        ).status_code,
    ]


def test_a_note_at_the_limit_is_kept_everywhere(world, reviewer, client, token_client):
    kernel = world.kernel(world.problems[0])
    client.force_login(reviewer)
    statuses = _post_everywhere(client, token_client(reviewer), kernel, "n" * NOTE_MAX_LENGTH)
    assert statuses == [302, 201, 201]
    assert Review.objects.filter(kernel=kernel).count() == 3


def test_a_note_over_the_limit_is_refused_everywhere(world, reviewer, client, token_client):
    kernel = world.kernel(world.problems[0])
    client.force_login(reviewer)
    statuses = _post_everywhere(client, token_client(reviewer), kernel, "n" * (NOTE_MAX_LENGTH + 1))
    assert statuses == [400, 400, 400]
    assert not Review.objects.exists()
