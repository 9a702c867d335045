"""Who made a run: staff and reviewers see the username (issue 28, case 7: runs show who made
them), and so does the maker; anyone else reads "an Ingestor". Usernames of staff are not public:
they name the accounts a password guesser would try."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.core.cache import cache

from leaderboard.models import Run
from leaderboard.reviews.services import A_MAKER

pytestmark = pytest.mark.django_db


@pytest.fixture
def made(run: Run, ingestor: User) -> Run:
    Run.objects.filter(pk=run.pk).update(created_by=ingestor)
    return run


def test_anonymous_and_plain_visitors_read_an_ingestor(made, token_client, visitor, client):
    for user in (None, visitor):
        assert token_client(user).get(f"/api/v1/runs/{made.pk}/").json()["created_by"] == A_MAKER
        assert {row["created_by"] for row in token_client(user).get("/api/v1/runs/").json()["results"]} == {A_MAKER}
    page = client.get(f"/runs/{made.pk}/").content.decode()
    assert f'by <span class="run-creator">{A_MAKER}</span>' in page and "ingestor</span>" not in page


def test_staff_reviewers_and_the_maker_read_the_username(made, token_client, reviewer, ingestor, client):
    staff = User.objects.create_user("staffer", is_staff=True)
    for user in (staff, reviewer, ingestor):
        assert token_client(user).get(f"/api/v1/runs/{made.pk}/").json()["created_by"] == "ingestor", user
    client.force_login(reviewer)
    assert 'by <span class="run-creator">ingestor</span>' in client.get(f"/runs/{made.pk}/").content.decode()


def test_a_run_the_server_made_names_nobody(run, token_client):
    assert token_client(None).get(f"/api/v1/runs/{run.pk}/").json()["created_by"] is None


def test_the_kept_leaderboard_never_carries_a_username_whoever_asked_first(made, token_client, reviewer):
    cache.clear()
    first = token_client(reviewer).get("/api/v1/leaderboard/?level=1").json()  # builds the kept board
    assert first["results"][0]["run"]["created_by"] == A_MAKER
    assert token_client(None).get("/api/v1/leaderboard/?level=1").json()["results"][0]["run"]["created_by"] == A_MAKER
