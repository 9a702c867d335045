"""A limit on failed sign-ins per username, whatever address they come from, that anonymous
traffic alone cannot cheaply hold against the account's owner.

The write limit counts sign-in attempts per client address; guessing one account's password from
many addresses needs a count per username too. Three counts, all in the counters store (never
evicted: leaderboard/ops/counters.py), per window of SIGN_IN_FAILURE_WINDOW_S from the first
failure:

- per username: failures from every address;
- per username and client address (leaderboard.ops.clients.client_address, the one a client cannot
  forge);
- per username: guesses, the failures whose password was checked (not refused by the lock).

A username is locked for an address when its failures reached SIGN_IN_FAILURE_LIMIT and that
address has failed for it at least once in the window. SignInLimitBackend then refuses before any
password is checked (PermissionDenied stops Django's backend chain), on every form that calls
authenticate(): the sign-in page and the admin's. From an address with no failures for the
username the password is checked as usual, so a correct one signs in: 10 anonymous failures (or 40
an hour) do not keep the owner out (with a lock per username alone, they did). After the lock a
guesser gets one guess per fresh address per window, so without more a guesser with many
addresses would get as many guesses.

The ceiling: once a username's guesses reach SIGN_IN_GUESS_CEILING (5 x SIGN_IN_FAILURE_LIMIT by
default) it is locked for every address, the owner's too, until the window of its first guess ends.
The trade: a guesser gets at most the ceiling's guesses per window, however many addresses it has;
and someone who wants to lock the owner out needs that many guesses, each past the first
SIGN_IN_FAILURE_LIMIT from an address of its own (40 fresh /64s per window, not 10 requests), to do
so for one window. A successful sign-in clears the username's counts (the owner's own typos do not
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


def _key(username: str, address: str = "", kind: str = "failures") -> str:
    # Hashed: a username is user input of any length and any characters; cache keys are not.
    name = username.strip().lower()
    digest = hashlib.sha256(f"{name}\x00{address}".encode("utf-8", "replace")).hexdigest()
    return (f"sign-in-{kind}-from:" if address else f"sign-in-{kind}:") + digest


def _address(request) -> str:
    return client_address(request) if request is not None else ""


def failures(username: str, address: str = "") -> int:
    """Failed sign-ins for `username` in its window: from every address, or from `address`."""
    return int(counters.get(_key(username, address)) or 0)


def guesses(username: str) -> int:
    """Failed sign-ins for `username` in its window whose password was checked, from every address."""
    return int(counters.get(_key(username, kind="guesses")) or 0)


def at_ceiling(username: str) -> bool:
    """Whether `username` is refused for every address (its guesses reached the ceiling)."""
    return bool(username) and guesses(username) >= settings.SIGN_IN_GUESS_CEILING


def is_locked(username: str, request=None) -> bool:
    """Whether `username` is refused for this request's address (any address when no request)."""
    if not username:
        return False
    if at_ceiling(username):
        return True
    if failures(username) < settings.SIGN_IN_FAILURE_LIMIT:
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
    """Count a failed sign-in; a guess too when the lock did not refuse it (the counts are read as
    the backend read them: the signal comes right after it)."""
    if not is_locked(username, request):
        _count(_key(username, kind="guesses"))
    _count(_key(username))
    if address := _address(request):
        _count(_key(username, address))


def clear(username: str, request=None) -> None:
    """After a success: the username's failures and guesses, and this address's failures for it."""
    counters.delete_many([_key(username), _key(username, kind="guesses")])
    if address := _address(request):
        counters.delete(_key(username, address))


def locked_message(username: str = "") -> str:
    minutes = max(1, settings.SIGN_IN_FAILURE_WINDOW_S // 60)
    if at_ceiling(username):
        return (
            f"Too many failed sign-ins for this username, from many addresses: it is refused everywhere for up "
            f"to {minutes} minutes. Try again later."
        )
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
            raise PermissionDenied(locked_message(username))
        return None


@receiver(user_login_failed)
def _count_failure(sender, credentials, request=None, **kwargs) -> None:
    username = credentials.get("username")
    if username:
        record_failure(str(username), request)


@receiver(user_logged_in)
def _clear_on_success(sender, request, user, **kwargs) -> None:
    clear(user.get_username(), request)
