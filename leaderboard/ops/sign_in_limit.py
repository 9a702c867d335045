"""A limit on failed sign-ins per username, whatever address they come from, that anonymous
traffic alone cannot hold against the account's owner.

The write limit counts sign-in attempts per client address; guessing one account's password from
many addresses needs a count per username too. Two counts, both in the counters store (never
evicted: leaderboard/ops/counters.py), per window of SIGN_IN_FAILURE_WINDOW_S from the first
failure:

- per username: failures from every address;
- per username and client address (leaderboard.ops.clients.client_address, the one a client cannot
  forge).

A username is locked for an address when its failures reached SIGN_IN_FAILURE_LIMIT and that
address has failed for it at least once in the window. SignInLimitBackend then refuses before any
password is checked (PermissionDenied stops Django's backend chain), on every form that calls
authenticate(): the sign-in page and the admin's. From an address with no failures for the
username the password is checked as usual, so a correct one signs in: 10 anonymous failures (or 40
an hour) no longer keep the owner out (issue 28, case 6). A guesser gets SIGN_IN_FAILURE_LIMIT
guesses in all, then one per fresh address per window (and each address stays within the write
limit). A successful sign-in clears both counts of the username (the owner's own typos do not
add up across sign-ins; a guesser gains SIGN_IN_FAILURE_LIMIT guesses per sign-in of the owner).
"""

from __future__ import annotations

import hashlib

from django.conf import settings
from django.contrib.auth.signals import user_logged_in, user_login_failed
from django.core.exceptions import PermissionDenied
from django.dispatch import receiver

from leaderboard.ops.clients import client_address
from leaderboard.ops.counters import counters


def _key(username: str, address: str = "") -> str:
    # Hashed: a username is user input of any length and any characters; cache keys are not.
    name = username.strip().lower()
    digest = hashlib.sha256(f"{name}\x00{address}".encode("utf-8", "replace")).hexdigest()
    return ("sign-in-failures-from:" if address else "sign-in-failures:") + digest


def _address(request) -> str:
    return client_address(request) if request is not None else ""


def failures(username: str, address: str = "") -> int:
    """Failed sign-ins for `username` in its window: from every address, or from `address`."""
    return int(counters.get(_key(username, address)) or 0)


def is_locked(username: str, request=None) -> bool:
    """Whether `username` is refused for this request's address (any address when no request)."""
    if not username or failures(username) < settings.SIGN_IN_FAILURE_LIMIT:
        return False
    address = _address(request)
    return not address or failures(username, address) > 0


def _count(key: str) -> None:
    # add() starts the window with the first failure; incr() keeps its expiry.
    if not counters.add(key, 1, timeout=settings.SIGN_IN_FAILURE_WINDOW_S):
        try:
            counters.incr(key)
        except ValueError:  # expired between add and incr
            counters.add(key, 1, timeout=settings.SIGN_IN_FAILURE_WINDOW_S)


def record_failure(username: str, request=None) -> None:
    _count(_key(username))
    if address := _address(request):
        _count(_key(username, address))


def clear(username: str, request=None) -> None:
    """After a success: the username's failures, and this address's for it."""
    counters.delete(_key(username))
    if address := _address(request):
        counters.delete(_key(username, address))


def locked_message() -> str:
    minutes = max(1, settings.SIGN_IN_FAILURE_WINDOW_S // 60)
    return (
        f"Too many failed sign-ins for this username, this address among them: it is refused here for up to "
        f"{minutes} minutes. Try again later."
    )


class SignInLimitBackend:
    """Authenticates no one; refuses a locked username so that the next backend never runs.

    Only `authenticate`, on purpose: without get_user and has_perm Django never picks it for a
    session (force_login, get_user) or asks it about permissions."""

    def authenticate(self, request, username=None, password=None, **kwargs):
        if username and is_locked(username, request):
            raise PermissionDenied(locked_message())
        return None


@receiver(user_login_failed)
def _count_failure(sender, credentials, request=None, **kwargs) -> None:
    username = credentials.get("username")
    if username:
        record_failure(str(username), request)


@receiver(user_logged_in)
def _clear_on_success(sender, request, user, **kwargs) -> None:
    clear(user.get_username(), request)
