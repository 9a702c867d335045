"""Boards served from a cache keyed by the read model's version, with ETag and Last-Modified so
repeat visitors get 304s.

The version (BoardVersion, per problem set) is bumped by every re-scoring of one of the set's runs
and by edits of what boards show beside scores (models, labs, runs, reported scores, launch posts:
leaderboard/reads/board_signals.py), so a cached board is never older than the data it shows; the
cache's own timeout only bounds memory. Pages for signed-in users are not cached (their header
differs), but still get validators that include the user."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

from django.core.cache import cache
from django.http import HttpRequest, HttpResponse
from django.utils.cache import get_conditional_response
from django.utils.http import http_date

from leaderboard.reads import board_store
from problems.models import ProblemSet

CACHE_SECONDS = 600


def validators(request: HttpRequest, problem_set: ProblemSet | None) -> tuple[str, float | None]:
    """(ETag, Last-Modified timestamp) of this board as the request asks it."""
    version, updated_at = board_store.board_version(problem_set)
    user = request.user.pk if request.user.is_authenticated else 0
    # The version's time too: a database restored or rebuilt from scratch restarts versions.
    stamp = updated_at.isoformat() if updated_at else "none"
    text = f"{problem_set.pk if problem_set else 0}:{version}:{stamp}:{user}:{request.get_full_path()}"
    etag = '"' + hashlib.sha256(text.encode()).hexdigest()[:24] + '"'
    return etag, updated_at.timestamp() if updated_at else None


def _stamp(response: HttpResponse, etag: str, last_modified: float | None) -> HttpResponse:
    response["ETag"] = etag
    if last_modified is not None:
        response["Last-Modified"] = http_date(last_modified)
    return response


def cached_board(
    request: HttpRequest, problem_set: ProblemSet | None, render: Callable[[], HttpResponse]
) -> HttpResponse:
    """The board `render` makes, from the cache when its version has not moved; 304 when the
    visitor's copy is current."""
    etag, last_modified = validators(request, problem_set)
    conditional = get_conditional_response(request, etag=etag, last_modified=last_modified)
    if conditional is not None:
        return _stamp(conditional, etag, last_modified)
    anonymous = not request.user.is_authenticated and last_modified is not None
    key = "board-page:" + etag
    response = cache.get(key) if anonymous else None
    if response is None:
        response = render()
        if anonymous and response.status_code == 200:
            cache.set(key, response, CACHE_SECONDS)
    return _stamp(response, etag, last_modified)


def cached_data(
    request: HttpRequest, problem_set: ProblemSet | None, build: Callable[[], Any]
) -> tuple[Any | None, str, float | None, HttpResponse | None]:
    """For API views: (data, etag, last_modified, 304 response or None); data from the cache
    when the version has not moved."""
    etag, last_modified = validators(request, problem_set)
    conditional = get_conditional_response(request, etag=etag, last_modified=last_modified)
    if conditional is not None:
        return None, etag, last_modified, _stamp(conditional, etag, last_modified)
    key = "board-data:" + etag
    data = cache.get(key) if last_modified is not None else None
    if data is None:
        data = build()
        cache.set(key, data, CACHE_SECONDS)
    return data, etag, last_modified, None


def stamp(response, etag: str, last_modified: float | None):
    """Add the validators to a response built elsewhere (the API's)."""
    return _stamp(response, etag, last_modified)
