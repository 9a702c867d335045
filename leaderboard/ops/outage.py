"""A database outage answers 503 with Retry-After and a short page (JSON under /api/), not a bare 500.

This is the project's handler500 (config/urls.py). Django calls it for any exception nothing else
handled, from a view, a middleware or a template, while that exception is being handled, so
`sys.exc_info()` names it: a database that cannot be reached (`OperationalError`: refused, dropped,
locked; `InterfaceError`: a connection already closed) is the host's trouble, and the client should
come back in a few seconds. Everything else stays Django's plain 500 page.

Both answers are rendered without touching the database: no context processors, no session.
Connections are checked before reuse (CONN_HEALTH_CHECKS, config/settings.py), so the first request
after the database returns gets a fresh connection instead of a dead one.
"""

from __future__ import annotations

import logging
import sys

from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.template import loader
from django.views import defaults

log = logging.getLogger(__name__)

DATABASE_ERRORS = (OperationalError, InterfaceError)
# Seconds a client is asked to wait: a restart or a failover of PostgreSQL takes a few.
RETRY_AFTER_S = 5


def server_error(request: HttpRequest) -> HttpResponse:
    """handler500: 503 for a database outage, Django's 500 page for anything else."""
    exc = sys.exc_info()[1]
    if isinstance(exc, DATABASE_ERRORS):
        return database_unavailable(request, exc)
    return defaults.server_error(request)


def database_unavailable(request: HttpRequest, exc: BaseException) -> HttpResponse:
    log.warning("database unavailable answering %s: %s", request.path, exc)
    message = f"The database is unavailable for a moment. Try again in {RETRY_AFTER_S} seconds."
    if request.path.startswith("/api/"):
        response: HttpResponse = JsonResponse({"detail": message}, status=503)
    else:
        page = loader.get_template("503.html").render({"retry_after_s": RETRY_AFTER_S})
        response = HttpResponse(page, status=503)
    response["Retry-After"] = str(RETRY_AFTER_S)
    return response
