"""A small HTTP server that answers like a broken or hostile site, for kbl's tests and
benchmarks/hardening_replay.py (issue 19 case 12): it records the Authorization header of each
request, redirects on request, and answers any body it is given."""

from __future__ import annotations

import contextlib
import http.server
import threading


class _Site(http.server.BaseHTTPRequestHandler):
    """Answers by path: /redirect-away and /redirect-home redirect; /got says which Authorization it
    was sent (recorded per server in `seen`); anything else answers `reply` with status 200."""

    seen: list[str | None]
    reply: bytes = b"{}"
    elsewhere: str = ""

    def do_GET(self):  # noqa: N802 - http.server's name
        self.seen.append(self.headers.get("Authorization"))
        if self.path.startswith("/redirect-away"):
            self._answer(302, b"", location=self.elsewhere + "/got")
        elif self.path.startswith("/redirect-home"):
            self._answer(302, b"", location="/got")
        else:
            self._answer(200, self.reply)

    def do_POST(self):  # noqa: N802
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.do_GET()

    def _answer(self, status: int, body: bytes, location: str = "") -> None:
        self.send_response(status)
        if location:
            self.send_header("Location", location)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@contextlib.contextmanager
def hostile_site(reply: bytes = b"{}", elsewhere: str = ""):
    handler = type("Handler", (_Site,), {"seen": [], "reply": reply, "elsewhere": elsewhere})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", handler.seen
    finally:
        server.shutdown()
        server.server_close()
