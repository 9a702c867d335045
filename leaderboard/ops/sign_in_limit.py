"""A limit on failed sign-ins per username, whatever address they come from.

The write limit counts sign-in attempts per client address; guessing one account's password from
many addresses needs a count per username too. After SIGN_IN_FAILURE_LIMIT failures within
SIGN_IN_FAILURE_WINDOW_S, SignInLimitBackend refuses that username before any password is checked
(PermissionDenied stops Django's backend chain), on every form that calls authenticate(): the
sign-in page and the admin's. A successful sign-in clears the count. The cost: anyone can lock an
account for the window by failing on purpose; the window is short and the owner can still use
an API token.
"""

from __future__ import annotations

import hashlib

from django.conf import settings
from django.contrib.auth.signals import user_logged_in, user_login_failed
from django.core.cache import cache
from django.core.exceptions import PermissionDenied
from django.dispatch import receiver


def _key(username: str) -> str:
    # Hashed: a username is user input of any length and any characters; cache keys are not.
    return "sign-in-failures:" + hashlib.sha256(username.strip().lower().encode("utf-8", "replace")).hexdigest()


def failures(username: str) -> int:
    return int(cache.get(_key(username)) or 0)


def is_locked(username: str) -> bool:
    return bool(username) and failures(username) >= settings.SIGN_IN_FAILURE_LIMIT


def record_failure(username: str) -> None:
    key = _key(username)
    # add() starts the window with the first failure; incr() keeps its expiry.
    if not cache.add(key, 1, timeout=settings.SIGN_IN_FAILURE_WINDOW_S):
        try:
            cache.incr(key)
        except ValueError:  # expired between add and incr
            cache.add(key, 1, timeout=settings.SIGN_IN_FAILURE_WINDOW_S)


def clear(username: str) -> None:
    cache.delete(_key(username))


def locked_message() -> str:
    minutes = max(1, settings.SIGN_IN_FAILURE_WINDOW_S // 60)
    return f"Too many failed sign-ins for this username: it is refused for up to {minutes} minutes. Try again later."


class SignInLimitBackend:
    """Authenticates no one; refuses a locked username so that the next backend never runs.

    Only `authenticate`, on purpose: without get_user and has_perm Django never picks it for a
    session (force_login, get_user) or asks it about permissions."""

    def authenticate(self, request, username=None, password=None, **kwargs):
        if username and is_locked(username):
            raise PermissionDenied(locked_message())
        return None


@receiver(user_login_failed)
def _count_failure(sender, credentials, request=None, **kwargs) -> None:
    username = credentials.get("username")
    if username:
        record_failure(str(username))


@receiver(user_logged_in)
def _clear_on_success(sender, request, user, **kwargs) -> None:
    clear(user.get_username())
