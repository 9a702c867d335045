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

pytestmark = pytest.mark.django_db
PASSWORD = "a-long-pass-9Xq!"


@pytest.fixture(autouse=True)
def _limits(settings):
    settings.SIGN_IN_FAILURE_LIMIT = 3
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
