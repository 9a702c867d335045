"""One write limit for the whole site: scope "writes", rate in
REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"], counted per user (per address when signed out) in the
counters store (leaderboard.ops.counters: a Redis that never evicts, shared by every gunicorn
worker; not the web's cache, which visitors can fill).
The address is the one a client cannot forge (leaderboard.ops.clients: REMOTE_ADDR, or the
X-Forwarded-For entry written by the outermost of TRUSTED_PROXY_COUNT proxies).

API views apply WriteRateThrottle (DRF's default throttle class); every other write (the problem
page's submission form, review pages, the admin) goes through write_rate_middleware, which applies
the same throttle to the same count. Reads are not limited.
"""

from __future__ import annotations

import math

from django.http import HttpResponse
from rest_framework.permissions import SAFE_METHODS
from rest_framework.settings import api_settings
from rest_framework.throttling import UserRateThrottle

from leaderboard.ops.clients import client_address
from leaderboard.ops.counters import counters


class WriteRateThrottle(UserRateThrottle):
    scope = "writes"
    cache = counters  # never evicted: anonymous traffic filling the cache must not lift the limit

    def get_rate(self) -> str | None:
        # Read the rate on each request (not once at import) so that settings overrides apply.
        return api_settings.DEFAULT_THROTTLE_RATES.get(self.scope)

    def get_ident(self, request) -> str:
        # DRF's own reads X-Forwarded-For whole unless NUM_PROXIES is set: a new value per request
        # was a new allowance per request.
        return client_address(request)

    def allow_request(self, request, view) -> bool:
        if request.method in SAFE_METHODS:
            return True
        return super().allow_request(request, view)


def _is_api_view(view_func) -> bool:
    # DRF's as_view() marks its views with .cls (rest_framework.views is not imported here: it
    # reads DEFAULT_THROTTLE_CLASSES, which names this module, when it is imported).
    return hasattr(getattr(view_func, "cls", None), "throttle_classes")


class WriteRateMiddleware:
    """WriteRateThrottle for the writes DRF does not see (pages, admin): 429 with Retry-After.
    Placed after AuthenticationMiddleware, so a signed-in user is counted as the same user as
    through the API."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)

    def process_view(self, request, view_func, view_args, view_kwargs):
        if request.method in SAFE_METHODS or _is_api_view(view_func):
            return None  # reads are free; DRF throttles its own views (after token authentication)
        throttle = WriteRateThrottle()
        if throttle.allow_request(request, None):
            return None
        wait = math.ceil(throttle.wait() or 1)
        response = HttpResponse(
            f"Too many writes: the limit is {throttle.rate}. Try again in {wait} seconds.\n",
            status=429,
            content_type="text/plain; charset=utf-8",
        )
        response["Retry-After"] = str(wait)
        return response
