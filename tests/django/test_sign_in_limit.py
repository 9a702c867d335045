"""Failed sign-ins are limited per username, from any address (leaderboard/ops/sign_in_limit.py),
on the sign-in page and the admin's (issue 19 case 4); the lock holds against the addresses that
failed, never against one with no failures (issue 28 case 6: anyone could keep any account
locked), and lives in a store the cache's eviction never reaches (issue 28 case 5)."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.core.cache import cache
from django.test import Client
from django.urls import reverse

from leaderboard.ops import sign_in_limit

pytestmark = pytest.mark.django_db
PASSWORD = "a-long-pass-9Xq!"


@pytest.fixture(autouse=True)
def _limits(settings):
    settings.SIGN_IN_FAILURE_LIMIT = 3
    settings.SIGN_IN_GUESS_CEILING = 15
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]  # fast; not what is tested
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {"writes": "1000/min"}}
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def alice() -> User:
    return User.objects.create_user("alice", password=PASSWORD, is_staff=True)


def _sign_in(username: str, password: str, address: str, url: str = "/sign-in/"):
    return Client().post(url, {"username": username, "password": password}, REMOTE_ADDR=address)


def test_failures_from_many_addresses_lock_the_username_for_those_addresses(alice):
    codes = [_sign_in("alice", "wrong", f"10.0.0.{i}").status_code for i in range(3)]
    assert codes == [200, 200, 429]  # the failure that reaches the limit is told so
    response = _sign_in("alice", PASSWORD, "10.0.0.1")  # the right password, from a guessing address
    assert response.status_code == 429
    assert b"Too many failed sign-ins for this username" in response.content
    assert "_auth_user_id" not in response.wsgi_request.session


def test_anonymous_failures_do_not_keep_the_owner_out(alice):
    """Issue 28 case 6: 10 anonymous failures locked the username for everyone for 15 minutes."""
    for i in range(10):
        _sign_in("alice", "wrong", f"10.0.0.{i}")
    assert _sign_in("alice", PASSWORD, "192.0.2.7").status_code == 302  # an address with no failures
    assert _sign_in("alice", PASSWORD, "192.0.2.7", url=reverse("admin:login")).status_code == 302


def test_after_the_lock_a_fresh_address_gets_one_guess(alice):
    for i in range(3):
        _sign_in("alice", "wrong", f"10.0.0.{i}")
    assert _sign_in("alice", "wrong", "10.0.9.9").status_code == 429  # its first guess counts, and locks it
    assert _sign_in("alice", PASSWORD, "10.0.9.9").status_code == 429


def test_the_lock_is_not_in_the_evictable_cache(alice):
    """Issue 28 case 5: the lockout lived in the allkeys-lru cache and anonymous board requests
    evicted it. It is in the counters store now: emptying the cache (what eviction does) keeps it."""
    for i in range(3):
        _sign_in("alice", "wrong", f"10.0.0.{i}")
    cache.clear()
    assert _sign_in("alice", PASSWORD, "10.0.0.1").status_code == 429


def test_the_lock_holds_on_the_admin_sign_in_too(alice):
    for i in range(3):
        _sign_in("ALICE", "wrong", f"10.0.0.{i}")  # usernames count case-insensitively
    response = _sign_in("alice", PASSWORD, "10.0.0.2", url=reverse("admin:login"))
    assert response.status_code == 200 and "_auth_user_id" not in response.wsgi_request.session


def test_other_usernames_are_not_locked(alice):
    User.objects.create_user("bob", password=PASSWORD)
    for i in range(3):
        _sign_in("alice", "wrong", f"10.0.0.{i}")
    assert _sign_in("bob", PASSWORD, "10.0.0.1").status_code == 302


def test_a_success_clears_the_count(alice):
    for _ in range(2):
        _sign_in("alice", "wrong", "10.0.0.1")
    assert _sign_in("alice", PASSWORD, "10.0.0.1").status_code == 302
    for _ in range(2):
        _sign_in("alice", "wrong", "10.0.0.1")
    assert _sign_in("alice", PASSWORD, "10.0.0.1").status_code == 302


# The ceiling: guesses spread over many addresses, each fresh one getting a checked password, are
# capped per username; past the cap every address is refused, the owner's too, for the window.


def _spread_guesses(n: int, first: int = 0) -> list[int]:
    return [_sign_in("alice", "wrong", f"10.1.{i // 250}.{i % 250}").status_code for i in range(first, first + n)]


def test_guesses_from_many_fresh_addresses_stop_at_the_ceiling(alice, settings):
    settings.SIGN_IN_GUESS_CEILING = 5
    _spread_guesses(5)  # 3 up to the lock, then one from each of 2 fresh addresses
    assert sign_in_limit.guesses("alice") == 5
    _spread_guesses(4, first=5)  # fresh addresses, each refused before its password is checked
    assert sign_in_limit.guesses("alice") == 5
    response = _sign_in("alice", PASSWORD, "192.0.2.7")  # the right password from a clean address
    assert response.status_code == 429 and "_auth_user_id" not in response.wsgi_request.session
    assert b"refused everywhere" in response.content
    admin = _sign_in("alice", PASSWORD, "192.0.2.8", url=reverse("admin:login"))
    assert admin.status_code == 200 and "_auth_user_id" not in admin.wsgi_request.session


def test_refused_attempts_do_not_count_toward_the_ceiling(alice, settings):
    """One address hammering after the lock is refused without a check: it cannot reach the ceiling."""
    settings.SIGN_IN_GUESS_CEILING = 5
    for _ in range(30):
        _sign_in("alice", "wrong", "10.0.0.1")
    assert sign_in_limit.guesses("alice") == 3
    assert _sign_in("alice", PASSWORD, "192.0.2.7").status_code == 302


def test_below_the_ceiling_the_owner_still_signs_in_from_a_clean_address(alice, settings):
    settings.SIGN_IN_GUESS_CEILING = 5
    _spread_guesses(4)
    assert _sign_in("alice", PASSWORD, "192.0.2.7").status_code == 302
