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


def _message(status: int, body: bytes) -> str:
    try:
        data = json.loads(body)
    except ValueError:
        return f"HTTP {status}: {printable(body[:300].decode('utf-8', 'replace'))}"
    if isinstance(data, dict) and isinstance(data.get("errors"), list):
        errors = "\n  ".join(printable(str(error)) for error in data["errors"])
        return f"HTTP {status}: {printable(str(data.get('detail', '')))}\n  " + errors
    return f"HTTP {status}: {printable(json.dumps(data)[:1000])}"


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
            raise ApiError(_message(exc.code, exc.read()), exc.code) from None
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
