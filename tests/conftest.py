"""Users every suite can use: an ingestor, a reviewer and a plain visitor (pytest-django gives
`admin_user`), and API clients that authenticate with a DRF token."""

from __future__ import annotations

import os
import time
from collections.abc import Callable

import pytest
from django.contrib.auth.models import Group, User

from tests.groups import ensure_staff_groups


def pytest_configure(config) -> None:
    # The host-wide precompiled torch headers (evaluation.builds.pch) cost ~70 s of CPU per cache folder,
    # and nearly every test builds into a fresh one: off, except where tests/evaluation/test_pch.py
    # turns them on (KB_PCH=1 in the environment runs every suite with them).
    os.environ.setdefault("KB_PCH", "0")
    # Likewise the unit server (evaluation.builds.units): off, except in tests/evaluation/test_unit_cache.py
    # (KB_UNITS=1 in the environment runs every suite's builds through it).
    os.environ.setdefault("KB_UNITS", "0")
    from django.conf import settings

    # WhiteNoise scans every static file each time a test client starts a handler (~50 ms a client,
    # over a thousand clients a suite); with autorefresh it finds a file when it is asked for. In
    # this process only: a live site a test starts runs its own settings.
    settings.WHITENOISE_AUTOREFRESH = True
    # Hashing at Django's iteration count cost about 20 s of CPU a database part (tests/hashers.py).
    settings.PASSWORD_HASHERS = ["tests.hashers.FewIterationsPBKDF2PasswordHasher", *settings.PASSWORD_HASHERS]


def pytest_runtest_logstart(nodeid, location) -> None:
    # KB_TEST_TIMELINE=FOLDER: each test's start time, one file per pytest process, to line up what
    # several pytest processes running at once did at the same moment (tests/run-suites.sh runs two a part).
    folder = os.environ.get("KB_TEST_TIMELINE")
    if folder:
        with open(os.path.join(folder, f"{os.getpid()}.txt"), "a") as fh:
            fh.write(f"{time.time():.1f} {nodeid}\n")


@pytest.fixture(autouse=True)
def _fresh_caches():
    """Every test starts with empty caches (local memory only: a Redis store is a live site's own):
    the write and sign-in limits count in their own store (leaderboard/ops/counters.py)."""
    from django.core.cache import caches

    for name in ("counters", "default"):
        # The default cache too: what it keeps (built boards, the featured set, the boards' catalogue
        # of choices) was read from another test's database, whose ids this test's may reuse.
        store = caches[name]
        if "LocMemCache" in type(store).__name__:
            store.clear()
    yield


def _user_in(username: str, group: str | None) -> User:
    # No password (force_login or a token signs them in): hashing one costs a second per test.
    user = User.objects.create_user(username, f"{username}@example.com", None)
    if group:
        ensure_staff_groups()  # a live-server (transactional) test's flush may have removed them
        user.groups.add(Group.objects.get(name=group))
    return user


@pytest.fixture
def ingestor(db) -> User:
    """A user in the Ingestors group (made by a data migration): adds scores, posts and runs."""
    return _user_in("ingestor", "Ingestors")


@pytest.fixture
def reviewer(db) -> User:
    """A user in the Reviewers group: views everything, records reviews."""
    return _user_in("reviewer", "Reviewers")


@pytest.fixture
def visitor(db) -> User:
    """A signed-in user with no permission at all."""
    return _user_in("visitor", None)


@pytest.fixture
def token_client(db) -> Callable:
    """`token_client(user)`: a DRF APIClient sending `Authorization: Token <key>` for `user`
    (`token_client(None)` gives an anonymous client)."""
    from rest_framework.authtoken.models import Token
    from rest_framework.test import APIClient

    def make(user: User | None) -> APIClient:
        client = APIClient()
        if user is not None:
            token, _ = Token.objects.get_or_create(user=user)
            client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
        return client

    return make
