"""Pages of one object (a kernel, a run) and the review queue, kept rendered while nothing they show
has changed, and rendered in the request otherwise.

Unlike a board (leaderboard/reads/board/served.py), such a page is never served stale: each request
reads the page's signature in one small query (`page_signatures.py`), and the kept rendering is
served only when it was made under the same signature. The signature holds every problem set's
board version and the marks waiting for the re-scorer (which every write of a result, review,
report, kernel, run, model or published figure makes or renews: leaderboard/boards/signals.py), and the
object's own evaluations (their number and newest, which a queued evaluation moves before it is
scored). While any of those evaluations is queued or running the page follows its progress and is
not kept. So a kept page costs a cache read and one query whatever the data's size, and a write
costs the next visitor one rendering.

Kept are renderings that hold nothing of the visitor but base.html's marked visitor parts
(`served.for_visitor` renders them for each): a kernel's or a run's page as an anonymous visitor
gets it (a signed-in visitor may see a review form, logs, a run's maker), and the review queue,
the same for every reviewer. A rendering that used the CSRF token, set a cookie or showed a message
is never kept. Nor is one inside a transaction (a test's): a transaction marks each run once, so
its own later writes would not move the signature, as each committed write does."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass

from django.contrib.messages import get_messages
from django.core.cache import cache
from django.db import transaction
from django.http import HttpRequest, HttpResponse

from leaderboard.reads.board import served
from leaderboard.reads.board.params import read_only

CACHE_SECONDS = 600  # bounds memory; a kept rendering is replaced as soon as its signature moves

Render = Callable[[HttpRequest], HttpResponse]  # the page, for a request
Signature = Callable[[], Hashable | None]  # read only when the page may be kept (page_signatures.py)


@dataclass(frozen=True)
class KeptPage:
    signature: Hashable
    response: HttpResponse


def kept_page(
    request: HttpRequest, signature_of: Signature | None, render: Render, params: Iterable[str] | None = None
) -> HttpResponse:
    """The page `render` makes, or its kept rendering when that was made under the signature
    `signature_of()` reads. None for `signature_of` (a visitor this page is never kept for) or for
    the signature (something on it is pending, or nothing was ever scored): rendered for this
    visitor. A kept rendering is made for nobody (an anonymous copy of the request) and served with
    the header's visitor parts rendered for each visitor.
    `params`: the query's parameters the page reads (one kept rendering for each of their values,
    whatever else the query holds); None: the whole query."""
    if signature_of is None or not _may_share(request) or transaction.get_connection().in_atomic_block:
        return render(request)
    if (signature := signature_of()) is None:
        return render(request)
    query = request.GET.urlencode() if params is None else read_only(request, params).urlencode()
    key = "kept-page:" + hashlib.sha256(f"{request.path}?{query}".encode()).hexdigest()[:24]
    kept = cache.get(key)
    if isinstance(kept, KeptPage) and kept.signature == signature:
        return served.for_visitor(kept.response, request)
    response = render(served.anonymous_copy(request))
    if _keepable(request, response):
        cache.set(key, KeptPage(signature, response), CACHE_SECONDS)
    return served.for_visitor(response, request)


def _may_share(request: HttpRequest) -> bool:
    """Whether this request may get, and leave, a rendering shared with others: a GET with no
    message waiting for the visitor (messages are shown once, to whoever they are for)."""
    return request.method in ("GET", "HEAD") and len(get_messages(request)) == 0


def _keepable(request: HttpRequest, response: HttpResponse) -> bool:
    """A complete page that names nobody: no form token (the copy shares the request's META, where
    using the token marks it), no cookie, no error."""
    return (
        response.status_code == 200
        and not response.streaming
        and not response.cookies
        and not request.META.get("CSRF_COOKIE_NEEDS_UPDATE")
    )
