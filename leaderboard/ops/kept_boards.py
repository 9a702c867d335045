"""The standard boards, kept built by the background re-scorer, so that a first visit to any of
them is answered from a kept build, never made to wait for one.

The standard boards (`standard_paths`) are those the site links to and scripts read: the overview;
each level's page, for each scoring rule, with its CSV and JSON downloads; each level's grid; the
API's leaderboard for each level and rule; each of those for the featured set (no `?set=`) and for
every set by name. A sweep (`sweep`) asks for each of them in this process, as a visitor would, under
`served.keeping()`: a board never built (or expired) is built now, one whose kept build lacks
writes older than served.KEEP_STALE_SECONDS is rebuilt, and a current one is kept longer. Boards
people read are rebuilt by their requests (served.py) long before a sweep would; the sweep is for
the ones nobody asked for lately. A sweep that finds no featured set kept (expired, or the cache
emptied) counts and keeps it (featured.py); writes to runs renew it, so a sweep does not count.

The re-scorer sweeps every SWEEP_SECONDS and spends at most SWEEP_BUDGET_SECONDS a sweep, and while
it is behind (its last pass took a full batch) a sweep rebuilds no stale board: re-scoring stays its
first job. A sweep that runs out of time goes on next time where it stopped, so every
standard board is visited in turn however long the list or the builds."""

from __future__ import annotations

import io
import logging
import time
from urllib.parse import urlencode, urlsplit

from django.conf import settings
from django.contrib.auth.models import AnonymousUser
from django.core.handlers.wsgi import WSGIRequest
from django.urls import resolve, reverse

from leaderboard.boards.scoring import RULES
from leaderboard.reads.board import featured, served
from leaderboard.reads.board.params import LEVEL_SLUGS
from problems.models import LEVELS, ProblemSet

log = logging.getLogger(__name__)

SWEEP_SECONDS = 10.0
SWEEP_BUDGET_SECONDS = 2.0
EXPORTS = ("", "csv", "json")  # the page, and its downloads


def standard_paths() -> list[str]:
    """Every standard board's path (see the module's docstring)."""
    paths = [reverse("overview")]
    for slug in ["", *ProblemSet.objects.order_by("slug").values_list("slug", flat=True)]:
        paths += _paths_of_set({"set": slug})
    return paths


def _paths_of_set(named: dict[str, str]) -> list[str]:
    levels = [_path(reverse("level-board", args=[level]), named | {"rule": rule, "export": export})
              for level in LEVEL_SLUGS for rule in RULES for export in EXPORTS]  # fmt: skip
    grids = [_path(reverse("level-grid", args=[level]), named) for level in LEVELS]
    api = [_path(reverse("api:leaderboard"), named | {"level": level, "rule": rule})
           for level in ("", *map(str, LEVELS)) for rule in RULES]  # fmt: skip
    return levels + grids + api


def _path(path: str, query: dict[str, str]) -> str:
    text = urlencode({name: value for name, value in query.items() if value})
    return f"{path}?{text}" if text else path


def sweep(start: int = 0, budget: float = SWEEP_BUDGET_SECONDS, rebuild_stale: bool = True) -> int:
    """Keep the standard boards built, from the `start`-th on, for at most `budget` seconds (at least
    one board); where the next sweep starts. Without `rebuild_stale` (a re-scorer behind on its
    marks), only the boards with no kept build are built."""
    featured.keep_featured_if_missing()
    paths = standard_paths()
    deadline = time.monotonic() + budget
    with served.keeping(rebuild_stale):
        for offset in range(len(paths)):
            index = (start + offset) % len(paths)
            ask(paths[index])
            if time.monotonic() >= deadline:
                return (index + 1) % len(paths)
    return start


def ask(path: str) -> int:
    """Ask for `path` in this process, as nobody signed in would; its status (0 when it failed)."""
    request = _request(path)
    match = resolve(request.path_info)
    try:
        return match.func(request, *match.args, **match.kwargs).status_code
    except Exception:  # one board failing (the database away) is no reason to stop keeping the others
        log.exception("keeping the board %s built failed", path)
        return 0


def _request(path: str) -> WSGIRequest:
    """A GET of `path` from nobody, addressed to SITE_URL (the API's boards link to their pages)."""
    site = urlsplit(settings.SITE_URL)
    path_info, _, query = path.partition("?")
    environ = {
        "REQUEST_METHOD": "GET", "PATH_INFO": path_info, "QUERY_STRING": query, "SCRIPT_NAME": "",
        "SERVER_NAME": site.hostname or "localhost", "SERVER_PORT": str(site.port or 80), "HTTP_HOST": site.netloc,
        "SERVER_PROTOCOL": "HTTP/1.1", "wsgi.url_scheme": site.scheme or "http", "wsgi.input": io.BytesIO(),
    }  # fmt: skip
    request = WSGIRequest(environ)
    request.user = AnonymousUser()
    return request
