"""The site as production runs it in front: nginx rendered from site/nginx/kernelbench.conf.template
before gunicorn with site/gunicorn.conf.py, and redis-server, all on free ports, unprivileged; and
the slow clients of issue 19 case 5 (slowloris: headers trickled a line a second).

Used by tests/load/test_front.py and benchmarks/hardening_replay.py (which also aims the same
clients at bare gunicorn, to show what the proxy is for).
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import requests
from gunicorn.ctl.client import ControlClient

from tests.integration.live_site import free_port, stop_processes, wait_for_port

REPO = Path(__file__).resolve().parents[2]
TEMPLATE = REPO / "site" / "nginx" / "kernelbench.conf.template"
NGINX = shutil.which("nginx") or "/usr/sbin/nginx"
UNPRIVILEGED = "nobody"  # nginx's user when the tests run as root


def render_server_block(listen: str, upstream: str) -> str:
    """The shipped server block with its two placeholders filled in, as envsubst would."""
    text = TEMPLATE.read_text()
    assert "${KB_LISTEN}" in text and "${KB_UPSTREAM}" in text, "the template lost a placeholder"
    return text.replace("${KB_LISTEN}", listen).replace("${KB_UPSTREAM}", upstream)


def render_nginx(workdir: Path, port: int, upstream: str) -> Path:
    """nginx.conf for an unprivileged nginx: the shipped server block inside the least top level
    nginx runs with (pid, logs and temporary files in workdir). The same top level as Debian's and
    the nginx image's, less their user, logs and MIME types."""
    (workdir / "kernelbench.conf").write_text(render_server_block(f"127.0.0.1:{port}", upstream))
    conf = workdir / "nginx.conf"
    conf.write_text(
        f"worker_processes 1;\npid {workdir}/nginx.pid;\nerror_log {workdir}/error.log warn;\ndaemon off;\n"
        "events { worker_connections 1024; }\n"
        "http {\n  access_log off;\n"
        + "".join(f"  {kind}_temp_path {workdir}/{kind}_temp;\n" for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
        + f"  include {workdir}/kernelbench.conf;\n}}\n"
    )  # fmt: skip
    return conf


def _as_unprivileged() -> dict:
    """Popen arguments that run nginx as `nobody` when we are root (nginx as root would keep a root
    master); nothing otherwise."""
    if os.geteuid() != 0:
        return {}
    user = pwd.getpwnam(UNPRIVILEGED)
    return {"user": user.pw_uid, "group": user.pw_gid, "extra_groups": []}


@dataclass
class Front:
    """redis-server, gunicorn (site/gunicorn.conf.py, `workers` x `threads`) and, with `proxy`,
    nginx before it. `url` is what clients use: nginx's port, or gunicorn's without the proxy."""

    env: dict[str, str]
    proxy: bool = True
    workers: int = 2
    threads: int = 2
    workdir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="kb-front-")))
    procs: list[subprocess.Popen] = field(default_factory=list)
    url: str = ""
    web_port: int = 0

    def start(self) -> Front:
        os.chmod(self.workdir, 0o755)
        redis_port = free_port()
        self._spawn(["redis-server", "--port", str(redis_port), "--bind", "127.0.0.1", "--save", "",
                     "--appendonly", "no", "--dir", str(self.workdir)], redis_port)  # fmt: skip
        self.web_port = free_port()
        # Its own SQLite in its var folder unless `env` names a database: a DATABASE_URL inherited
        # from the caller (tests/with-postgres.sh's) names a database that pytest never created.
        inherited = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
        env = {**inherited, **self.env, "REDIS_URL": f"redis://127.0.0.1:{redis_port}/0", "KB_VAR_DIR": str(self.workdir / "var"),
               "WEB_CONCURRENCY": str(self.workers), "WEB_THREADS": str(self.threads), "TRUSTED_PROXY_COUNT": "1" if self.proxy else "0"}  # fmt: skip
        self._spawn([sys.executable, "-m", "gunicorn", "config.wsgi", "--config", "site/gunicorn.conf.py",
                     "--bind", f"127.0.0.1:{self.web_port}", "--access-logfile", "/dev/null"], self.web_port, env=env)  # fmt: skip
        self.url = f"http://127.0.0.1:{self.web_port}"
        if self.proxy:
            port = free_port()
            nginx_dir = self.workdir / "nginx"
            nginx_dir.mkdir(mode=0o755)
            conf = render_nginx(nginx_dir, port, f"127.0.0.1:{self.web_port}")
            if os.geteuid() == 0:
                user = pwd.getpwnam(UNPRIVILEGED)
                os.chown(nginx_dir, user.pw_uid, user.pw_gid)
            self._spawn([NGINX, "-e", str(nginx_dir / "error.log"), "-p", str(nginx_dir), "-c", str(conf)], port,
                        **_as_unprivileged())  # fmt: skip
            self.url = f"http://127.0.0.1:{port}"
        self._wait_until_served()
        return self

    def _spawn(self, command: list[str], port: int, **kwargs) -> None:
        log = open(self.workdir / f"{Path(command[0]).name}-{port}.log", "wb")  # noqa: SIM115 - closed with the process
        proc = subprocess.Popen(command, cwd=REPO, stdout=log, stderr=subprocess.STDOUT, **kwargs)
        self.procs.append(proc)
        wait_for_port(port, proc)

    def _wait_until_served(self, seconds: float = 60) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            try:
                if requests.get(self.url + "/healthz", timeout=5).status_code == 200:
                    return
            except requests.RequestException:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"{self.url}/healthz never answered 200")

    def stop(self) -> None:
        stop_processes(self.procs)
        shutil.rmtree(self.workdir, ignore_errors=True)


class SlowClients:
    """`n` connections that send a request line, then one header line a second, never the end of
    the headers: each holds whatever reads its request for as long as it is let."""

    def __init__(self, url: str, n: int = 40):
        host, port = url.removeprefix("http://").split(":")
        self.address = (host, int(port))
        self.n = n
        self.sockets: list[socket.socket] = []
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._trickle, daemon=True)

    def __enter__(self) -> SlowClients:
        for _ in range(self.n):
            sock = socket.create_connection(self.address, timeout=5)
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            self.sockets.append(sock)
        self.thread.start()
        time.sleep(1.0)  # let the server take them all in
        return self

    def _trickle(self) -> None:
        line = 0
        while not self.stopped.wait(1.0):
            line += 1
            for sock in self.sockets:
                try:
                    sock.sendall(f"X-Slow-{line}: 1\r\n".encode())
                except OSError:
                    pass  # closed by the server: that is the defence

    def __exit__(self, *exc) -> None:
        self.stopped.set()
        self.thread.join(timeout=5)
        for sock in self.sockets:
            sock.close()


def probe_healthz(url: str, probes: int = 5, timeout: float = 3.0) -> list[float | None]:
    """Seconds each /healthz took, a second apart; None for one that timed out or failed."""
    seconds: list[float | None] = []
    for _ in range(probes):
        start = time.monotonic()
        try:
            ok = requests.get(url + "/healthz", timeout=timeout, headers={"Connection": "close"}).status_code == 200
            seconds.append(round(time.monotonic() - start, 3) if ok else None)
        except requests.RequestException:
            seconds.append(None)
        time.sleep(max(0.0, 1.0 - (time.monotonic() - start)))
    return seconds


def _gunicorn(var_dir: Path, port: int) -> subprocess.Popen:
    env = {
        **os.environ,
        "KB_VAR_DIR": str(var_dir),
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "WEB_CONCURRENCY": "1",
    }
    command = [sys.executable, "-m", "gunicorn", "config.wsgi", "--config", "site/gunicorn.conf.py",
               "--bind", f"127.0.0.1:{port}"]  # fmt: skip
    return subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _answering_pid(path: Path, seconds: float = 30) -> int | None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if path.exists():
            try:
                with ControlClient(str(path), timeout=5) as client:
                    return client.send_command("show stats")["pid"]
            except Exception:  # noqa: BLE001 - not listening yet
                pass
        time.sleep(0.1)
    return None


def control_socket_owners() -> tuple[list[int], list[int | None]]:
    """Two gunicorn instances with site/gunicorn.conf.py, one var folder, two binds (the site and
    `make bench-web` side by side): (their pids, the pid each one's control socket answers with)."""
    var_dir = Path(tempfile.mkdtemp(prefix="kb-ctl-"))  # short: a Unix socket's path holds 107 bytes
    ports = [free_port(), free_port()]
    procs = [_gunicorn(var_dir, port) for port in ports]
    try:
        for proc, port in zip(procs, ports, strict=True):
            wait_for_port(port, proc)
        answering = [_answering_pid(var_dir / "run" / f"gunicorn-127.0.0.1-{port}.ctl") for port in ports]
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait(timeout=30)
        shutil.rmtree(var_dir, ignore_errors=True)
    return [proc.pid for proc in procs], answering
