"""Boards served from their last complete build, rebuilt off the request path, so that they stay
fast while results land every second (docs/performance.md, "Boards under writes").

A board (a page, one of its downloads, the API leaderboard's data: one per URL) is built once and
kept in the cache with the read model's version its build read and its "as of" time, taken just
before that read (or the oldest write still waiting for the background re-scorer, when earlier:
leaderboard/boards/): every write committed before then is in the build. A request reads the current
version and the oldest unrefreshed mark in one small query (`board_stored.board_state`; neither a
request nor a build re-scores: the background re-scorer does) and then:

- serves the kept build when nothing was written since;
- serves the kept build when something was, and starts a rebuild in a background thread; when the
  oldest write it lacks is older than BOARD_FRESHNESS_SECONDS (a board nobody asked for since), the
  kept build is still what this request gets, marked for no shared cache (s-maxage=0), and its "as
  of" line says how old it is; the next request after the rebuild gets the fresh one;
- when nothing is kept (a board nobody asked for within CACHE_SECONDS, or since the cache was
  emptied), builds it in this request and serves it: a first visit is answered with the board, never
  "come back later". A request that finds another request building that board waits for that build
  at most BOARD_BUILD_BUDGET_MS; only a build slower than that (a database too slow to serve pages)
  is answered "being built" (503 with Retry-After), in the kind of body asked for (a page that
  reloads itself, the API's JSON detail, a download's CSV or JSON: leaderboard/reads/error_bodies.py);
- inside a transaction (a test's), rebuilds a stale board in the request: a background thread could
  not see its writes.

A build is scoped to one problem set's boards, or, for a page that shows runs, models or problems
of any set (a model's page, the lists of models, problems and reported scores, search), to every
set's together (`EVERY_SET`: `board_stored.every_set_state`, the versions' sum), which any set's
bump makes stale.

The standard boards (each set's levels, rules, downloads, grids, the API's) are kept built by the
background re-scorer (leaderboard/ops/kept_boards.py), so that a first visit to any of them is a
cache read; a board outside them pays for its own first build. Every later request's cost is a
cache read and one small query, whatever the data's size.

One build of a board runs at a time, and the next starts no sooner than BOARD_REBUILD_SECONDS
after it ends (a lock in the cache: across processes when the cache is shared); a request that
finds the board building is served the kept build. A process runs one background rebuild at a
time. So the work of keeping boards current is bounded by the number of boards asked for, not
by the write rate or the request rate.

So a stored result shows within the bound whatever the write rate, and a board costs a cache read
however often results arrive. ETag and Last-Modified describe the build served, and advance with
it; Cache-Control lets shared caches keep an anonymous board for what is left of the window.

A page is built for nobody (an anonymous copy of the first request) and kept once for everyone; a
signed-in visitor gets the kept page with the header's marked parts that name the visitor (its
name, sign-out form, review link: templates/includes/visitor_*.html) rendered for them
(`for_visitor`), with validators that include the user and `private`. The API's data is kept for
everyone."""

from __future__ import annotations

import copy
import hashlib
import logging
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AnonymousUser
from django.core.cache import cache
from django.db import connections, transaction
from django.http import HttpRequest, HttpResponse
from django.template.loader import render_to_string
from django.utils.cache import get_conditional_response, patch_cache_control
from django.utils.http import http_date

from leaderboard.boards import stored as board_stored
from leaderboard.reads.error_bodies import error_in_kind
from problems.models import ProblemSet

log = logging.getLogger(__name__)

CACHE_SECONDS = 600  # bounds memory; a kept build is replaced long before by its version moving
# A standard board's kept build that lacks writes older than this is rebuilt by the re-scorer's sweep
# (`keeping`); a younger one waits for a request to ask for it (each sweep's building is bounded).
KEEP_STALE_SECONDS = 60
LOCK_SECONDS = 30  # a board's build lock, should its process die while building
RETRY_SECONDS = 1  # Retry-After of "being built"
BUILDING, RESTING = "building", "resting"  # a board's lock: a build runs, or one ended within the debounce
BUILDING_DETAIL = "This leaderboard is being built (nobody asked for it recently); ask again in a second."

_one_rebuild = threading.Lock()  # one background rebuild per process at a time


class EverySet:
    """The scope of a page that shows runs of any problem set (a model's page, the lists of models,
    problems and reported scores): kept under the versions of every set together
    (`board_stored.every_set_state`), so that a write that moves any set's boards makes it stale."""

    pk = "every"


EVERY_SET = EverySet()
Scope = ProblemSet | EverySet | None  # a set's boards, every set's, or none (nothing scored: nothing kept)

Build = Callable[[datetime], Any]  # makes the board's body, given its "as of" time
PageBuild = Callable[[HttpRequest, datetime], HttpResponse]  # a page, for a request, "as of" a time
# The <!--kb-visitor:NAME--> regions: base.html's, and the problem page's submit link.
VISITOR_PARTS = ("nav", "account", "submit")


@dataclass(frozen=True)
class Kept:
    """One complete build of a board."""

    body: Any  # the HttpResponse, or the API's data rendered (leaderboard.api.renderers.RenderedJSON)
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
    status: int = 200  # 503 while the board is being built (`body` then says so)

    def stamp(self, response):
        if self.status != 200:
            response["Retry-After"] = str(RETRY_SECONDS)
            patch_cache_control(response, no_store=True)
            return response
        response["ETag"] = self.etag
        if self.modified is not None:
            response["Last-Modified"] = http_date(self.modified.timestamp())
        patch_cache_control(response, **self.cache_control)
        return response

    def not_modified(self, request: HttpRequest) -> HttpResponse | None:
        """A 304 when the visitor's copy is this build."""
        if self.status != 200:
            return None
        last_modified = self.modified.timestamp() if self.modified else None
        response = get_conditional_response(request, etag=self.etag, last_modified=last_modified)
        return None if response is None else self.stamp(response)


def cached_board(request: HttpRequest, problem_set: Scope, render: PageBuild) -> HttpResponse:
    """The board page `render` makes, built for nobody and kept (the last complete build), with the
    header's visitor parts rendered for this visitor; or a 304 when the visitor has it."""
    nobody = anonymous_copy(request)
    served = serve(request, problem_set, "page", lambda as_of: render(nobody, as_of))
    return served.not_modified(request) or served.stamp(for_visitor(served.body, request))


def serve(request: HttpRequest, problem_set: Scope, kind: str, build: Build) -> Served:
    """The build of this board that this request gets (see the module's docstring). Every build is
    the same for everyone; a signed-in visitor's validators name the user, and only their browser
    may keep the page (its header names them)."""
    user = request.user.pk if kind == "page" and request.user.is_authenticated else 0
    path = request.get_full_path()
    key = f"board-{kind}:" + _digest(f"{problem_set.pk if problem_set else 0}:{path}")
    kept, remaining = _current_build(key, problem_set, build)
    if kept is None:
        return Served(_building(request, kind), "", None, {}, status=503)
    etag = _etag(problem_set, kept.version, user, path)
    if user:
        return Served(kept.body, etag, kept.modified, {"private": True, "no_cache": True})
    return Served(kept.body, etag, kept.modified, {"public": True, "max_age": 0, "s_maxage": remaining})


def anonymous_copy(request: HttpRequest) -> HttpRequest:
    """A copy of `request` as nobody signed in would send it: what a kept page is built for."""
    nobody = copy.copy(request)
    nobody.user = AnonymousUser()
    return nobody


def for_visitor(body: Any, request: HttpRequest) -> Any:
    """The kept page with base.html's visitor parts rendered for this request's user (a new
    response: the kept one is everyone's). Anything else (a download, "being built") as it is."""
    if not request.user.is_authenticated or not isinstance(body, HttpResponse) or body.status_code != 200:
        return body
    html = body.content.decode()
    for name in VISITOR_PARTS:
        start, end = f"<!--kb-visitor:{name}-->", f"<!--/kb-visitor:{name}-->"
        head, found, rest = html.partition(start)
        if not found or end not in rest:
            continue
        part = render_to_string(f"includes/visitor_{name}.html", request=request)
        html = head + start + part + rest[rest.index(end) :]
    response = HttpResponse(html, status=body.status_code, content_type=body["Content-Type"])
    for header, value in body.items():
        if header.lower() not in ("content-type", "content-length"):
            response[header] = value
    return response


def _current_build(key: str, problem_set: Scope, build: Build) -> tuple[Kept | None, int]:
    """(the build to serve, seconds a shared cache may keep it); None while a cold board builds."""
    freshness = settings.BOARD_FRESHNESS_SECONDS
    state = _state(problem_set)
    kept = cache.get(key)
    since = None if kept is None else lacking_since(kept, state)
    if kept is not None and _keeping.active:
        return _keep(key, kept, since, problem_set, build), freshness
    if (kept is None or since is not None) and transaction.get_connection().in_atomic_block:
        return _build_and_keep(key, problem_set, build), freshness  # a background thread could not see the writes
    if kept is None:
        return _cold(key, problem_set, build), freshness
    if since is None:
        return kept, freshness
    # One build of a board at a time, and none within BOARD_REBUILD_SECONDS of the last: whoever
    # does not get the lock is served the kept build while that build runs.
    if cache.add(_lock(key), BUILDING, timeout=LOCK_SECONDS) and _rebuild_later(key, problem_set, build) is None:
        cache.delete(_lock(key))  # this process is rebuilding another board: leave it to the next request
    return kept, max(0, int(freshness - (time.time() - since)))


def _cold(key: str, problem_set: Scope, build: Build) -> Kept | None:
    """A board with no kept build: built in this request (whoever takes the board's lock first, or
    finds it only resting after a build), or, while another request builds it, that build waited
    for at most BOARD_BUILD_BUDGET_MS; None when it is not done by then."""
    if cache.add(_lock(key), BUILDING, timeout=LOCK_SECONDS):
        try:
            return _build_and_keep(key, problem_set, build)
        finally:
            cache.delete(_lock(key))
    deadline = time.monotonic() + settings.BOARD_BUILD_BUDGET_MS / 1000
    while time.monotonic() < deadline:
        if (kept := cache.get(key)) is not None:
            return kept
        if cache.get(_lock(key)) != BUILDING:  # no build runs (one ended without keeping, or rests): build here
            return _build_and_keep(key, problem_set, build)
        time.sleep(0.02)
    return None


class _Keeping(threading.local):
    active = False  # this thread keeps boards built (`keeping`): it builds in place, and waits for nothing
    stale_after = float(KEEP_STALE_SECONDS)  # rebuild a kept build lacking writes older than this


_keeping = _Keeping()


@contextmanager
def keeping(rebuild_stale: bool = True) -> Iterator[None]:
    """Within the block, a board this thread asks for is kept built in place: one never built is
    built now, and (`rebuild_stale`) one whose kept build lacks writes older than KEEP_STALE_SECONDS,
    unless another build of it runs or rests; any other is kept CACHE_SECONDS more. The background
    re-scorer's (leaderboard/ops/kept_boards.py)."""
    _keeping.active = True
    _keeping.stale_after = KEEP_STALE_SECONDS if rebuild_stale else float("inf")
    try:
        yield
    finally:
        _keeping.active = False


def _keep(key: str, kept: Kept, since: float | None, problem_set: Scope, build: Build) -> Kept:
    if since is None or time.time() - since < _keeping.stale_after:
        cache.touch(key, CACHE_SECONDS)
        return kept
    if not cache.add(_lock(key), BUILDING, timeout=LOCK_SECONDS):
        return kept
    try:
        return _build_and_keep(key, problem_set, build)
    finally:
        _debounce(key)


def _building(request: HttpRequest, kind: str) -> Any:
    """What a request gets while its board is being built: the API's detail, a download's error in
    its own format, or a page that reloads."""
    if kind != "page":
        return {"detail": BUILDING_DETAIL, "retry_after": RETRY_SECONDS}
    if (download := error_in_kind(request, BUILDING_DETAIL, 503)) is not None:
        return download
    context = {"retry": RETRY_SECONDS, "detail": BUILDING_DETAIL}
    html = render_to_string("leaderboard/board_building.html", context, request=request)
    return HttpResponse(html, status=503)


def lacking_since(kept: Kept, state: board_stored.BoardState) -> float | None:
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


def _build_and_keep(key: str, problem_set: Scope, build: Build) -> Kept:
    """Build from the stored rows as they are (a build re-scores nothing: reads never write) and
    keep the build, dated as of the oldest write it lacks."""
    as_of = time.time()
    state = _state(problem_set)
    if state.dirty_since is not None:  # writes the re-scorer is about to take are not in this build:
        as_of = min(as_of, state.dirty_since.timestamp())  # it is as of the oldest of them
    kept = Kept(build(datetime.fromtimestamp(as_of, UTC)), state.key, state.updated_at, as_of)
    # Kept only once scores exist: a build without a version could not tell when it went stale.
    if state.updated_at is not None and _keepable(kept.body):
        cache.set(key, kept, CACHE_SECONDS)
    return kept


def _state(problem_set: Scope) -> board_stored.BoardState:
    if isinstance(problem_set, EverySet):
        return board_stored.every_set_state()
    return board_stored.board_state(problem_set)


def _keepable(body: Any) -> bool:
    return not isinstance(body, HttpResponse) or body.status_code == 200


def _rebuild_later(key: str, problem_set: Scope, build: Build) -> Future | None:
    """Build in a thread of this process when its one slot is free (a process rebuilding several
    boards at once would starve its own requests); the build's Future, or None when the slot is
    taken. The rebuild holds the board's lock BOARD_REBUILD_SECONDS after it (the debounce)."""
    if not _one_rebuild.acquire(blocking=False):
        return None
    built: Future = Future()

    def rebuild() -> None:
        try:
            built.set_result(_build_and_keep(key, problem_set, build))
        except Exception as exc:  # the kept build stays served; a request after the debounce retries
            log.exception("building board %s failed", key)
            built.set_exception(exc)
        finally:
            _debounce(key)
            _one_rebuild.release()
            connections.close_all()  # this thread's own connections

    threading.Thread(target=rebuild, name="board-rebuild", daemon=True).start()
    return built


def _lock(key: str) -> str:
    return "board-building:" + key


def _debounce(key: str) -> None:
    """Hold the board's lock BOARD_REBUILD_SECONDS more after a build: the debounce."""
    cache.set(_lock(key), RESTING, timeout=settings.BOARD_REBUILD_SECONDS)


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def _etag(problem_set: Scope, version: tuple[int, str], user: int, path: str) -> str:
    return '"' + _digest(f"{problem_set.pk if problem_set else 0}:{version}:{user}:{path}") + '"'
