"""Site-wide HTTP guards that pages and API share, each written once:

- reject_control_characters: a query parameter holding NUL or another control character is a 400
  naming the parameter, before any view runs (PostgreSQL refuses NUL in text: it was a 500);
- content_security_policy: the CONTENT_SECURITY_POLICY header on every response, when set
  (production; Django 5.2 has no CSP of its own);
- private_per_user: an answer that depends on who asks (a signed-in user, a token) is
  `Cache-Control: private`, every answer varies on Authorization and Cookie, and an answer that sets
  a cookie is never publicly cacheable (a shared cache must not serve one user's answer, or a
  session cookie, to another);
- limit_request_body: a body over settings.REQUEST_BODY_MAX_BYTES is a 413, from Content-Length,
  before anything reads it (pages and admin included: Django spools file uploads to disk without a
  cap of its own). API routes have tighter caps of their own (leaderboard/api/parsers.py).
"""

from __future__ import annotations

import re

from django.conf import settings
from django.http import HttpResponse, JsonResponse
from django.utils.cache import patch_cache_control, patch_vary_headers

CONTROL = re.compile(r"[\x00-\x1f\x7f]")
# Production's policy (config/settings_production.py). No inline script anywhere: figures' data
# travel in json_script blocks, which do not run, and code is static. Styles allow 'unsafe-inline':
# plotly.js writes its own <style> element and style attributes. Images allow data: and blob: for
# plotly's "download plot" button. tests/browser/test_csp_in_browser.py renders every page under it.
PRODUCTION_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data: blob:; "
    "font-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'self'; form-action 'self'; "
    "frame-ancestors 'none'"
)


def bad_query_parameter(request) -> str | None:
    """What is wrong with the query string, or None: the first parameter (name or value) with a
    control character."""
    for name, values in request.GET.lists():
        shown = repr(CONTROL.sub("?", name))[:60]
        if CONTROL.search(name):
            return f"query parameter name {shown} contains a control character"
        if any(CONTROL.search(value) for value in values):
            return f"query parameter {shown} contains a control character (such as NUL)"
    return None


def reject_control_characters(get_response):
    def middleware(request):
        problem = bad_query_parameter(request)
        if problem is None:
            return get_response(request)
        return _refuse(request, 400, f"Bad request: {problem}.")

    return middleware


def _refuse(request, status: int, problem: str) -> HttpResponse:
    if request.path.startswith("/api/"):
        return JsonResponse({"detail": problem}, status=status)
    # Plain text: the message quotes the request, and is never parsed as HTML.
    return HttpResponse(f"{problem}\n", status=status, content_type="text/plain; charset=utf-8")


def limit_request_body(get_response):
    def middleware(request):
        try:
            length = int(request.META.get("CONTENT_LENGTH") or 0)
        except ValueError:
            return _refuse(request, 400, "Bad request: Content-Length is not a number.")
        limit = settings.REQUEST_BODY_MAX_BYTES
        if length > limit:
            return _refuse(request, 413, f"Request body is {length} bytes; the limit is {limit} bytes.")
        return get_response(request)

    return middleware


def content_security_policy(get_response):
    def middleware(request):
        response = get_response(request)
        policy = settings.CONTENT_SECURITY_POLICY
        if policy and "Content-Security-Policy" not in response:
            response["Content-Security-Policy"] = policy
        return response

    return middleware


SHARED_ONLY = re.compile(r"\s*(public|s-maxage=\d+)\s*")


def _make_private(response) -> None:
    """`Cache-Control: private`, with what only shared caches read (public, s-maxage) taken out."""
    kept = [part for part in response.get("Cache-Control", "").split(",") if part and not SHARED_ONLY.fullmatch(part)]
    response["Cache-Control"] = ", ".join(part.strip() for part in kept)
    patch_cache_control(response, private=True)
    if not response["Cache-Control"].strip(", "):
        del response["Cache-Control"]


def private_per_user(get_response):
    """Placed before SessionMiddleware, so that it sees the cookies that middleware sets."""

    def middleware(request):
        response = get_response(request)
        patch_vary_headers(response, ("Authorization", "Cookie"))
        user = getattr(request, "user", None)
        per_user = "HTTP_AUTHORIZATION" in request.META or bool(user is not None and user.is_authenticated)
        if per_user or response.cookies:
            _make_private(response)
        return response

    return middleware
