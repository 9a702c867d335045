"""Boards served from their last complete build, rebuilt off the request path (issue 22;
docs/performance.md, "Boards under writes").

A board (a page, one of its downloads, the API leaderboard's data: one per URL) is built once and
kept in the cache with the read model's version its build read and its "as of" time, taken just
before that read: every write committed before then is in the build. A request reads the current
version and the oldest unrefreshed mark in one small query (`board_store.board_state`; requests never
re-score) and then:

- serves the kept build when nothing was written since;
- serves the kept build when something was, as long as the oldest write it lacks is younger than
  BOARD_FRESHNESS_SECONDS, and starts a rebuild in a background thread;
- builds in the request when nothing is kept, or the kept build lacks a write older than the
  bound (a board nobody asked for since), or the request runs inside a transaction (a test's: a
  background thread could not see its writes).

One build of a board runs at a time, and the next starts no sooner than BOARD_REBUILD_SECONDS
after it ends (a lock in the cache: across processes when the cache is shared); a request that
finds the board building is served the kept build. A process runs one background rebuild at a
time. So the work of keeping boards current is bounded by the number of boards asked for, not
by the write rate or the request rate.

So a stored result shows within the bound whatever the write rate, and a board costs a cache read
however often results arrive. ETag and Last-Modified describe the build served, and advance with
it; Cache-Control lets shared caches keep an anonymous board for what is left of the window.
Pages for signed-in users are built per request (their header differs), with validators that
include the user; the API's data is kept for everyone."""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from django.conf import settings
from django.core.cache import cache
from django.db import connections, transaction
from django.http import HttpRequest, HttpResponse
from django.utils.cache import get_conditional_response, patch_cache_control
from django.utils.http import http_date

from leaderboard.reads.board import store as board_store
from problems.models import ProblemSet

log = logging.getLogger(__name__)

CACHE_SECONDS = 600  # bounds memory; a kept build is replaced long before by its version moving
LOCK_SECONDS = 30  # a board's build lock, should its process die while building

_one_rebuild = threading.Lock()  # one background rebuild per process at a time

Build = Callable[[datetime], Any]  # makes the board's body, given its "as of" time


@dataclass(frozen=True)
class Kept:
    """One complete build of a board."""

    body: Any  # the HttpResponse, or the API's data
    version: tuple[int, str]  # BoardState.key its build read
    modified: datetime | None  # when that version was made: Last-Modified
    as_of: float  # epoch seconds just before the build read the version


@dataclass(frozen=True)
class Served:
    """A build as one request gets it: the body and the headers that describe it."""

    body: Any
    etag: str
    modified: datetime | None
    cache_control: dict[str, Any]

    def stamp(self, response):
        response["ETag"] = self.etag
        if self.modified is not None:
            response["Last-Modified"] = http_date(self.modified.timestamp())
        patch_cache_control(response, **self.cache_control)
        return response

    def not_modified(self, request: HttpRequest) -> HttpResponse | None:
        """A 304 when the visitor's copy is this build."""
        last_modified = self.modified.timestamp() if self.modified else None
        response = get_conditional_response(request, etag=self.etag, last_modified=last_modified)
        return None if response is None else self.stamp(response)


def cached_board(request: HttpRequest, problem_set: ProblemSet | None, render: Build) -> HttpResponse:
    """The board `render` makes: the last complete build, or a 304 when the visitor has it."""
    served = serve(request, problem_set, "page", render)
    return served.not_modified(request) or served.stamp(served.body)


def serve(request: HttpRequest, problem_set: ProblemSet | None, kind: str, build: Build) -> Served:
    """The build of this board that this request gets (see the module's docstring)."""
    # A page names its signed-in user in its header: built per request, never kept. The API's
    # data is the same for everyone.
    user = request.user.pk if kind == "page" and request.user.is_authenticated else 0
    path = request.get_full_path()
    if user:
        state = board_store.board_state(problem_set)
        etag = _etag(problem_set, state.key, user, path)
        return Served(build(datetime.now(UTC)), etag, state.updated_at, {"private": True, "no_cache": True})
    key = f"board-{kind}:" + _digest(f"{problem_set.pk if problem_set else 0}:{path}")
    kept, remaining = _current_build(key, problem_set, build)
    etag = _etag(problem_set, kept.version, 0, path)
    return Served(kept.body, etag, kept.modified, {"public": True, "max_age": 0, "s_maxage": remaining})


def _current_build(key: str, problem_set: ProblemSet | None, build: Build) -> tuple[Kept, int]:
    """(the build to serve, seconds a shared cache may keep it)."""
    freshness = settings.BOARD_FRESHNESS_SECONDS
    state = board_store.board_state(problem_set)
    kept = cache.get(key)
    if kept is None:
        return _build_and_keep(key, problem_set, build), freshness
    since = lacking_since(kept, state)
    if since is None:
        return kept, freshness
    if transaction.get_connection().in_atomic_block:
        return _build_and_keep(key, problem_set, build), freshness
    age = time.time() - since
    # One build of a board at a time, and none within BOARD_REBUILD_SECONDS of the last: whoever
    # does not get the lock is served the kept build while that build runs.
    if not cache.add(_lock(key), 1, timeout=LOCK_SECONDS):
        return kept, max(0, int(freshness - age))
    if age < freshness:
        if not _rebuild_later(key, problem_set, build):
            cache.delete(_lock(key))  # this process is rebuilding another board: leave it to the next request
        return kept, int(freshness - age)
    # Older than the bound (a board nobody asked for since the write): this request builds it.
    try:
        return _build_and_keep(key, problem_set, build), freshness
    finally:
        _debounce(key)


def lacking_since(kept: Kept, state: board_store.BoardState) -> float | None:
    """When the oldest write that a kept build lacks was made (epoch seconds, never later than the
    truth); None when it lacks none."""
    since = []
    if state.dirty_since is not None:  # committed, its re-scoring not yet done
        since.append(state.dirty_since.timestamp())
    if state.key != kept.version:
        # One version later: the one write it lacks is the version's own. More: it lacks writes
        # made after its build read the version, the oldest at an unknown time after that.
        one_later = state.version == kept.version[0] + 1 and state.updated_at is not None
        since.append(state.updated_at.timestamp() if one_later else kept.as_of)
    return min(since) if since else None


def _build_and_keep(key: str, problem_set: ProblemSet | None, build: Build) -> Kept:
    board_store.refresh_dirty(problem_set)  # a mark whose re-scoring was lost (or is in a test's transaction)
    as_of = time.time()
    state = board_store.board_state(problem_set)
    kept = Kept(build(datetime.fromtimestamp(as_of, UTC)), state.key, state.updated_at, as_of)
    # Kept only once scores exist: a build without a version could not tell when it went stale.
    if state.updated_at is not None and _keepable(kept.body):
        cache.set(key, kept, CACHE_SECONDS)
    return kept


def _keepable(body: Any) -> bool:
    return not isinstance(body, HttpResponse) or body.status_code == 200


def _rebuild_later(key: str, problem_set: ProblemSet | None, build: Build) -> bool:
    """Rebuild in a thread of this process, if none is running here (a process rebuilding several
    boards at once would starve its own requests); False when one is."""
    if not _one_rebuild.acquire(blocking=False):
        return False

    def rebuild() -> None:
        try:
            _build_and_keep(key, problem_set, build)
        except Exception:  # the kept build stays served; a request after the debounce retries
            log.exception("rebuilding board %s failed", key)
        finally:
            _debounce(key)
            _one_rebuild.release()
            connections.close_all()  # this thread's own connections

    threading.Thread(target=rebuild, name="board-rebuild", daemon=True).start()
    return True


def _lock(key: str) -> str:
    return "board-building:" + key


def _debounce(key: str) -> None:
    """Hold the board's lock BOARD_REBUILD_SECONDS more after a build: the debounce."""
    cache.set(_lock(key), 1, timeout=settings.BOARD_REBUILD_SECONDS)


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def _etag(problem_set: ProblemSet | None, version: tuple[int, str], user: int, path: str) -> str:
    return '"' + _digest(f"{problem_set.pk if problem_set else 0}:{version}:{user}:{path}") + '"'
