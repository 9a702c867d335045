"""A database outage answers 503 with Retry-After and a short page (JSON under /api/ and for a
board's JSON download, CSV for its CSV download: leaderboard/reads/error_bodies.py), not a bare 500.

This is the project's handler500 (config/urls.py). Django calls it for any exception nothing else
handled, from a view, a middleware or a template, while that exception is being handled, so
`sys.exc_info()` names it: a database that cannot be reached (`OperationalError`: refused, dropped,
locked; `InterfaceError`: a connection already closed) is the host's trouble, and the client should
come back in a few seconds. Everything else stays a plain 500 (Django's page, or a download's or the
API's error body).

Both answers are rendered without touching the database: no context processors, no session.
Connections are checked before reuse (CONN_HEALTH_CHECKS, config/settings.py), so the first request
after the database returns gets a fresh connection instead of a dead one.
"""

from __future__ import annotations

import logging
import sys

from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse
from django.template import loader
from django.views import defaults

from leaderboard.reads.error_bodies import error_in_kind

log = logging.getLogger(__name__)

DATABASE_ERRORS = (OperationalError, InterfaceError)
# Seconds a client is asked to wait: a restart or a failover of PostgreSQL takes a few.
RETRY_AFTER_S = 5


def server_error(request: HttpRequest) -> HttpResponse:
    """handler500: 503 for a database outage, Django's 500 page for anything else."""
    exc = sys.exc_info()[1]
    if isinstance(exc, DATABASE_ERRORS):
        return database_unavailable(request, exc)
    return error_in_kind(request, "Server error.", 500) or defaults.server_error(request)


def database_unavailable(request: HttpRequest, exc: BaseException) -> HttpResponse:
    log.warning("database unavailable answering %s: %s", request.path, exc)
    message = f"The database is unavailable for a moment. Try again in {RETRY_AFTER_S} seconds."
    response = error_in_kind(request, message, 503)
    if response is None:
        page = loader.get_template("503.html").render({"retry_after_s": RETRY_AFTER_S})
        response = HttpResponse(page, status=503)
    response["Retry-After"] = str(RETRY_AFTER_S)
    return response
