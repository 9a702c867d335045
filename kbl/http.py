"""The site's REST API over urllib: JSON in and out, multipart uploads, one error type.

The token goes to the site's own origin only: urllib copies every header onto a redirect, so a
redirect to another host (or scheme, or port) would hand it the token; SameOriginRedirects drops
`Authorization` whenever a redirect leaves the origin. Every reply is checked against the shape the
command reads (kbl/replies.py) before use.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
import uuid
from typing import Any
from urllib.parse import urlsplit

from kbl.config import Settings
from kbl.display import printable
from kbl.errors import ApiError
from kbl.replies import UnexpectedReply, expect

TIMEOUT_S = 120
DEFAULT_PORTS = {"http": 80, "https": 443}


def origin(url: str) -> tuple[str, str, int | None]:
    """(scheme, host, port) with the scheme's default port filled in: what a token is bound to."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    return scheme, (parts.hostname or "").lower(), parts.port or DEFAULT_PORTS.get(scheme)


class SameOriginRedirects(urllib.request.HTTPRedirectHandler):
    """Follows redirects as urllib does, without `Authorization` once a redirect leaves the origin
    (and so on every hop after it)."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        new = super().redirect_request(req, fp, code, msg, headers, newurl)
        if new is not None and origin(new.full_url) != origin(req.full_url):
            new.remove_header("Authorization")
        return new


OPENER = urllib.request.build_opener(SameOriginRedirects)


def _error(status: int, body: bytes) -> ApiError:
    """The site's 4xx/5xx as one ApiError: its detail, and its errors one a line (`field: message`
    for DRF's field errors, rather than the raw JSON)."""
    try:
        data = json.loads(body)
    except ValueError:
        return ApiError(f"HTTP {status}: {printable(body[:300].decode('utf-8', 'replace'))}", status)
    if not isinstance(data, dict):
        return ApiError(f"HTTP {status}: {printable(json.dumps(data)[:1000])}", status)
    if isinstance(data.get("errors"), list):
        lines = [printable(str(error)) for error in data["errors"]]
        return ApiError(f"HTTP {status}: {printable(str(data.get('detail', '')))}", status, lines)
    detail = data.get("detail")
    lines = [
        f"{printable(str(field))}: {printable(_text(errors))}" for field, errors in data.items() if field != "detail"
    ]
    head = f"HTTP {status}: {printable(str(detail))}" if detail else f"HTTP {status}: the site refused the request"
    return ApiError(head, status, lines[:20])


def _text(errors: Any) -> str:
    """DRF's messages for one field (a string, a list of them, or nested) as one line."""
    if isinstance(errors, list):
        return " ".join(_text(error) for error in errors)
    if isinstance(errors, dict):
        return "; ".join(f"{key}: {_text(value)}" for key, value in errors.items())
    return str(errors)


def multipart(fields: dict[str, str], files: dict[str, tuple[str, bytes]]) -> tuple[bytes, str]:
    """(body, content type) of a multipart/form-data request."""
    boundary = uuid.uuid4().hex
    parts: list[bytes] = []
    for name, value in fields.items():
        parts.append(f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n{value}\r\n'.encode())
    for name, (filename, data) in files.items():
        head = (
            f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"; filename="{filename}"\r\n'
            "Content-Type: application/octet-stream\r\n\r\n"
        )
        parts.append(head.encode() + data + b"\r\n")
    parts.append(f"--{boundary}--\r\n".encode())
    return b"".join(parts), f"multipart/form-data; boundary={boundary}"


class Api:
    def __init__(self, settings: Settings):
        self.settings = settings

    def request(self, method: str, path: str, body: bytes | None = None, content_type: str = "") -> bytes:
        headers = {"Accept": "application/json, application/zip", "User-Agent": "kbl"}
        if self.settings.token:
            headers["Authorization"] = f"Token {self.settings.token}"
        if content_type:
            headers["Content-Type"] = content_type
        request = urllib.request.Request(self.settings.url + path, data=body, method=method, headers=headers)
        try:
            with OPENER.open(request, timeout=TIMEOUT_S) as response:
                return response.read()
        except urllib.error.HTTPError as exc:
            raise _error(exc.code, exc.read()) from None
        except (urllib.error.URLError, OSError) as exc:
            raise ApiError(f"cannot reach {self.settings.url}: {getattr(exc, 'reason', exc)}") from None

    def _json(self, path: str, raw: bytes, shape: Any) -> Any:
        url = self.settings.url + path
        try:
            data = json.loads(raw)
        except ValueError:
            raise UnexpectedReply(f"unexpected reply from {url}: not JSON ({printable(repr(raw[:80]))})") from None
        return expect(data, shape, url)

    def get(self, path: str, shape: Any = object) -> Any:
        return self._json(path, self.request("GET", path), shape)

    def post(self, path: str, data: dict[str, Any] | None = None, shape: Any = object) -> Any:
        body = json.dumps(data or {}).encode()
        return self._json(path, self.request("POST", path, body, "application/json") or b"{}", shape)

    def upload(
        self, path: str, fields: dict[str, str], files: dict[str, tuple[str, bytes]], shape: Any = object
    ) -> Any:
        body, content_type = multipart(fields, files)
        return self._json(path, self.request("POST", path, body, content_type), shape)
