"""Failed sign-ins are limited per username, from any address (leaderboard/ops/sign_in_limit.py),
on the sign-in page and the admin's; a success clears the count. Issue 19 case 4."""

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


def test_failures_from_many_addresses_lock_the_username(alice):
    codes = [_sign_in("alice", "wrong", f"10.0.0.{i}").status_code for i in range(3)]
    assert codes == [200, 200, 429]  # the failure that reaches the limit is told so
    response = _sign_in("alice", PASSWORD, "10.0.1.1")
    assert response.status_code == 429
    assert b"Too many failed sign-ins for this username" in response.content
    assert "_auth_user_id" not in response.wsgi_request.session


def test_the_lock_holds_on_the_admin_sign_in_too(alice):
    for i in range(3):
        _sign_in("ALICE", "wrong", f"10.0.0.{i}")  # usernames count case-insensitively
    response = _sign_in("alice", PASSWORD, "10.0.2.1", url=reverse("admin:login"))
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
