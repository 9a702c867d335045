"""The site's REST API over urllib: JSON in and out, multipart uploads, one error type."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
import uuid
from typing import Any

from kbl.config import Settings
from kbl.errors import ApiError

TIMEOUT_S = 120


def _message(status: int, body: bytes) -> str:
    try:
        data = json.loads(body)
    except ValueError:
        return f"HTTP {status}: {body[:300].decode('utf-8', 'replace')}"
    if isinstance(data, dict) and "errors" in data:
        return f"HTTP {status}: {data.get('detail', '')}\n  " + "\n  ".join(map(str, data["errors"]))
    return f"HTTP {status}: {json.dumps(data)[:1000]}"


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
            with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
                return response.read()
        except urllib.error.HTTPError as exc:
            raise ApiError(_message(exc.code, exc.read()), exc.code) from None
        except (urllib.error.URLError, OSError) as exc:
            raise ApiError(f"cannot reach {self.settings.url}: {getattr(exc, 'reason', exc)}") from None

    def get(self, path: str) -> Any:
        return json.loads(self.request("GET", path))

    def post(self, path: str, data: dict[str, Any] | None = None) -> Any:
        body = json.dumps(data or {}).encode()
        return json.loads(self.request("POST", path, body, "application/json") or b"{}")

    def upload(self, path: str, fields: dict[str, str], files: dict[str, tuple[str, bytes]]) -> Any:
        body, content_type = multipart(fields, files)
        return json.loads(self.request("POST", path, body, content_type))
