"""Integration tests: a real redis-server and real worker processes (`manage.py evalworker`).

Worker processes must see the test database, so these tests use `transactional_db` (data is
committed) and, on SQLite, a file-based test database instead of the in-memory default; on
PostgreSQL they connect to pytest-django's `test_<name>` database. Workers get its URL through
DATABASE_URL, as a real worker host would.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest
from django.conf import settings
from django.db import connection, transaction

from leaderboard.evaluations import queue as jobs
from leaderboard.models import Evaluation, Kernel, LanguageModel, Run
from problems.models import Hardware, Problem, ProblemSet
from tests.sources import PROBLEM_SOURCE

REPO = Path(__file__).resolve().parents[2]
REDIS_SERVER = shutil.which("redis-server") or "/usr/bin/redis-server"
SUBPROCESS_SESSIONS = "kb-test-subprocess"  # the application_name of the subprocesses' database sessions

# A file-based SQLite test database (workers are other processes). Set here, at collection, before
# pytest-django creates the test database; harmless for the other suites of the same session.
_default_db = settings.DATABASES["default"]
if _default_db["ENGINE"] == "django.db.backends.sqlite3":
    _default_db.setdefault("TEST", {})["NAME"] = os.path.join(tempfile.mkdtemp(prefix="kb-it-"), "test.sqlite3")


CORRECT_KERNEL = textwrap.dedent(
    """
    import torch
    import torch.nn as nn

    class ModelNew(nn.Module):
        def __init__(self):
            super().__init__()

        def forward(self, a, b):
            return a @ b
    """
)

WRONG_KERNEL = CORRECT_KERNEL.replace("return a @ b", "return a @ b + 1.0")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RedisServer:
    """A throwaway redis-server. Without persistence a restart loses everything, as a crash would;
    `persistent=True` keeps an append-only file synced on every write (site/compose.yaml's Redis
    persists too), so a restart keeps every job."""

    def __init__(self, workdir: Path, persistent: bool = False) -> None:
        self.port = free_port()
        self.workdir = workdir
        self.persistent = persistent
        self.proc: subprocess.Popen[bytes] | None = None
        self.url = f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [
                REDIS_SERVER,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "yes" if self.persistent else "no",
                "--appendfsync",
                "always",
                "--dir",
                str(self.workdir),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("redis-server did not start")

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)

    def restart(self) -> None:
        self.stop()
        self.start()


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory) -> Iterator[RedisServer]:
    if not os.path.exists(REDIS_SERVER):
        pytest.skip("redis-server is not installed (make test installs it)")
    server = RedisServer(tmp_path_factory.mktemp("redis"))
    server.start()
    yield server
    server.stop()


def database_url() -> str:
    """A URL for the test database as this process sees it (after pytest-django created it)."""
    s = connection.settings_dict
    if s["ENGINE"] == "django.db.backends.sqlite3":
        return f"sqlite:///{s['NAME']}"
    user = quote(s.get("USER") or "")
    password = f":{quote(s['PASSWORD'])}" if s.get("PASSWORD") else ""
    host = s.get("HOST") or "127.0.0.1"
    port = f":{s['PORT']}" if s.get("PORT") else ""
    # Named, so that the sessions a killed subprocess leaves are told from this process's others
    # (end_other_sessions).
    return f"postgres://{user}{password}@{host}{port}/{s['NAME']}?application_name={SUBPROCESS_SESSIONS}"


# The knobs workers and the in-process sweep share in these tests: fast heartbeats, a short stale
# limit and no backoff, so that failures are seen in seconds.
FAST_KNOBS = {
    "EVAL_HEARTBEAT_S": 1,
    "EVAL_STALE_AFTER_S": 4,
    "EVAL_SWEEP_INTERVAL_S": 1,
    "EVAL_RETRY_BACKOFF_S": 0,
    "EVAL_QUEUED_GRACE_S": 0,
    "EVAL_MAX_ATTEMPTS": 3,
    "EVAL_WORKERS": 1,  # one worker per evalworker whatever the host (tests that need more say so)
}


@pytest.fixture
def env(transactional_db, redis_server, settings, tmp_path) -> Iterator[dict[str, str]]:
    """Redis flushed, this process pointed at it, and the environment for worker processes."""
    settings.REDIS_URL = redis_server.url
    for key, value in FAST_KNOBS.items():
        setattr(settings, key, value)
    jobs._redis.cache_clear()
    jobs.redis_connection().flushall()
    environ = {
        **os.environ,
        "DATABASE_URL": database_url(),
        "REDIS_URL": redis_server.url,
        "PYTHONUNBUFFERED": "1",
        "KB_FAKE_EVAL_LOG": str(tmp_path / "fake-calls.log"),
        "LOG_LEVEL": "INFO",
        **{k: str(v) for k, v in FAST_KNOBS.items()},
    }
    environ.pop("EVAL_FUNCTION", None)
    yield environ
    jobs._redis.cache_clear()


class Workers:
    """Worker processes started for one test; all of them are killed at its end."""

    def __init__(self, env: dict[str, str], logdir: Path) -> None:
        self.env, self.logdir, self.procs = env, logdir, []

    def start(self, *args: str, fake: bool = False) -> subprocess.Popen[bytes]:
        env = dict(self.env)
        if fake:
            # The fake scoring needs no hardware facts: skip the probe (a child importing torch,
            # several seconds on a busy 2-core box) so that the many workers these tests start are quick.
            env["EVAL_FUNCTION"] = "tests.integration.fake_evaluation.evaluate"
            args = ("--no-probe", *args)
        log = open(self.logdir / f"worker-{len(self.procs)}.log", "wb")
        proc = subprocess.Popen(
            [sys.executable, "manage.py", "evalworker", "--device", "cpu", *args],
            cwd=REPO,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.procs.append(proc)
        return proc

    def run_burst(self, *args: str, fake: bool = False, timeout: float = 180) -> str:
        proc = self.start("--burst", *args, fake=fake)
        assert self.exit_code(proc, timeout) == 0, self.output(proc)
        return self.output(proc)

    def exit_code(self, proc: subprocess.Popen[bytes], timeout: float) -> int:
        """Wait for a worker to exit; one still running after `timeout` fails the test with its log."""
        try:
            return proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            pytest.fail(f"worker still running after {timeout} s:\n{self.output(proc)}")

    def output(self, proc: subprocess.Popen[bytes]) -> str:
        return (self.logdir / f"worker-{self.procs.index(proc)}.log").read_text(errors="replace")

    def kill_all(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                proc.wait(timeout=10)
        end_other_sessions()


def end_other_sessions() -> None:
    """End the database sessions the killed workers leave. PostgreSQL ends a session whose client
    died only when it next reads from it: one in the middle of a statement (a worker's re-scoring
    after its commit, waiting for a lock) keeps its locks, and the test database's flush then
    deadlocked with it (the flush failed and the next test found the old rows). Only the sessions
    of subprocesses (named by database_url): this process's own, a live server thread's among them,
    stay."""
    if connection.vendor != "postgresql" or connection.in_atomic_block:
        return
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() "
            "AND pid <> pg_backend_pid() AND application_name = %s",
            [SUBPROCESS_SESSIONS],
        )


@pytest.fixture
def workers(env, tmp_path) -> Iterator[Workers]:
    w = Workers(env, tmp_path)
    yield w
    w.kill_all()


@pytest.fixture
def cpu(transactional_db) -> Hardware:
    return Hardware.objects.get_or_create(slug="cpu", defaults={"name": "CPU", "kind": Hardware.Kind.CPU})[0]


@pytest.fixture
def make_kernels(transactional_db, cpu):
    """make_kernels(sources) -> kernels of one run, one per source, each on its own problem number."""
    problem_set = ProblemSet.objects.create(slug="it", name="Integration")
    model = LanguageModel.objects.create(name="Test model")
    run = Run.objects.create(model=model, problem_set=problem_set, hardware=cpu)
    counter = {"n": 0}

    def make(sources: list[str]) -> list[Kernel]:
        kernels = []
        for source in sources:
            counter["n"] += 1
            problem = Problem.objects.create(
                problem_set=problem_set, level=1, number=counter["n"], name=f"P{counter['n']}", source=PROBLEM_SOURCE
            )
            kernels.append(Kernel.objects.create(run=run, problem=problem, source=source))
        return kernels

    return make


def submit(kernels: list[Kernel], hardware: Hardware) -> list[Evaluation]:
    """Ask for evaluations as the site does: in a transaction, enqueued when it commits."""
    with transaction.atomic():
        return [jobs.request_evaluation(kernel, hardware) for kernel in kernels]


def fake_source(marker: str, *directives: str) -> str:
    lines = [f"# fake: marker={marker}", *(f"# fake: {d}" for d in directives)]
    return "\n".join(lines) + "\n" + CORRECT_KERNEL


def fake_calls(env: dict[str, str]) -> list[tuple[str, str]]:
    """(event, marker) for every line the fake evaluation logged."""
    path = Path(env["KB_FAKE_EVAL_LOG"])
    if not path.exists():
        return []
    return [tuple(line.split()[:2]) for line in path.read_text().splitlines() if line.strip()]


def wait_for(predicate, timeout: float = 60, interval: float = 0.2, message: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    pytest.fail(f"timed out after {timeout} s waiting for {message}")
