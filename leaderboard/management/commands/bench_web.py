"""The web benchmark's in-process parts (benchmarks/web/run.sh drives it; `make bench-web`):

- `generate --scale 1.3M`: the issue-13 dataset, bulk-inserted into an empty database, then
  `rebuild_boards`; prints the time of each phase.
- `urls`: the pages and API endpoints the benchmark times, one per line.
- `queries [--check]`: SQL queries each of those URLs costs (after a warm-up request); with
  --check, fails when one exceeds its bound (the CI smoke test's assertion).
- `writes`: the write paths' cost at this size: re-scoring one run after an evaluation finishes,
  and importing a 270-kernel KernelBench run folder (seconds and queries).
- `writer --rate 5 [--seconds S | --count N]`: finished evaluations stored through the GPU worker's
  own path, each into a different run (benchmarks/web/churn.py), until interrupted.
- `visible --base URL`: seconds until a stored result shows on the level-1 boards over HTTP.
"""

from __future__ import annotations

import json
import statistics
import tempfile
import time
from pathlib import Path

from django.contrib.auth.models import Group, User
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from benchmarks.web import churn, dataset
from benchmarks.web.http_bench import BOARD_PAGES
from leaderboard.models import Kernel, LanguageModel, Run
from leaderboard.reads.board import store as board_store
from problems.models import Problem

# Queries a page may cost, whatever the data size (the smoke test's bound).
QUERY_BOUND = 25


class Command(BaseCommand):
    help = "Generate the web benchmark's dataset, list its URLs, count their queries, time the writes."

    def add_arguments(self, parser):
        parser.add_argument(
            "action", choices=["generate", "urls", "session", "queries", "writes", "writer", "visible"]
        )
        parser.add_argument("--scale", default="20k", help="kernels (= evaluations): 20k, 1.3M, ...")
        parser.add_argument("--seed", type=int, default=0)
        parser.add_argument("--check", action="store_true", help="fail when a URL exceeds the query bound")
        parser.add_argument("--rate", type=float, default=1.0, help="writer: evaluations stored per second")
        parser.add_argument("--seconds", type=float, help="writer: stop after this long")
        parser.add_argument("--count", type=int, help="writer: stop after this many")
        parser.add_argument("--stop-file", default="", help="writer: stop once this file exists")
        parser.add_argument("--base", help="visible: the served site, http://host:port")
        parser.add_argument("--trials", type=int, default=3, help="visible: results stored and watched")

    def handle(self, *args, **options):
        getattr(self, options["action"])(options)

    def generate(self, options):
        if Run.objects.exists():
            raise CommandError("the database already has runs: the benchmark needs an empty one")
        scale = dataset.parse_scale(options["scale"])
        self.stdout.write(f"generating {scale:,} kernels and evaluations ({dataset.Shape.of(scale)})")
        timings = dataset.generate(scale, options["seed"], write=self.stdout.write)
        started = time.monotonic()
        call_command("rebuild_boards", stdout=self.stdout)
        timings["rebuild_boards"] = time.monotonic() - started
        for phase, seconds in timings.items():
            self.stdout.write(f"  {phase}: {seconds:.1f} s")

    def urls(self, options):
        for url in bench_urls():
            self.stdout.write(url)

    def session(self, options):
        """A signed-in reviewer's session cookie, for timing the review queue over HTTP."""
        client = Client()
        client.force_login(reviewer())
        self.stdout.write(f"sessionid={client.cookies['sessionid'].value}")

    def queries(self, options):
        client = Client(HTTP_HOST="localhost", HTTP_X_FORWARDED_PROTO="https", secure=True)
        client.force_login(reviewer())
        over = []
        for url in bench_urls():
            client.get(url)  # warm-up: caches, the read model's dirty runs
            with CaptureQueriesContext(connection) as queries:
                status = client.get(url).status_code
            self.stdout.write(f"{len(queries):4d} queries  {status}  {url}")
            if len(queries) > QUERY_BOUND or status != 200:
                over.append(url)
        if options["check"] and over:
            raise CommandError(f"over {QUERY_BOUND} queries or not 200: {', '.join(over)}")

    def writes(self, options):
        run = Run.objects.order_by("pk").first()
        seconds = []
        for _ in range(20):
            started = time.monotonic()
            board_store.refresh_runs([run.pk])
            seconds.append(time.monotonic() - started)
        self.stdout.write(
            f"re-scoring one run ({run.n_kernels} kernels): median {statistics.median(seconds) * 1000:.1f} ms"
        )
        with tempfile.TemporaryDirectory() as folder, CaptureQueriesContext(connection) as queries:
            write_run_folder(Path(folder))
            started = time.monotonic()
            call_command("import_run", folder, "--model", "model-0", "--hardware", "h100", stdout=self.stdout)
            self.stdout.write(f"importing a 270-kernel run: {time.monotonic() - started:.2f} s, {len(queries)} queries")


    def writer(self, options):
        churn.write(
            options["rate"], options["seconds"], options["count"], options["seed"], self._say, options["stop_file"]
        )

    def _say(self, line: str) -> None:
        """A line at once, through a pipe too (churn_bench waits for the writer's first)."""
        self.stdout.write(line)
        self.stdout.flush()

    def visible(self, options):
        seconds = churn.visible(options["base"], options["trials"], limit=30.0, out=self.stdout.write)
        self.stdout.write(f"visible after: median {statistics.median(seconds):.2f} s, max {max(seconds):.2f} s")


def reviewer() -> User:
    user, _ = User.objects.get_or_create(username="bench-reviewer")
    user.groups.add(Group.objects.get(name="Reviewers"))
    return user


def bench_urls() -> list[str]:
    """Every page type and API endpoint of the issue's table, on this database's rows."""
    busiest = LanguageModel.objects.order_by("pk").first()
    problem = Problem.objects.order_by("pk").first()
    kernel = Kernel.objects.order_by("pk").first()
    run = Run.objects.order_by("pk").first()
    return [
        *BOARD_PAGES,
        f"/models/{busiest.slug}/",
        "/search/?q=conv",
        f"/problems/{problem.pk}/",
        f"/kernels/{kernel.pk}/",
        f"/runs/{run.pk}/",
        "/reported/",
        "/review/",
        "/problems/",
        "/models/",
        "/api/v1/leaderboard/?level=1&p=1.0",
        "/api/v1/evaluations/",
        "/api/v1/runs/",
        "/api/v1/kernels/?page=100",
    ]


def write_run_folder(folder: Path) -> None:
    """A KernelBench run folder of 270 kernels (sample 0 of every problem) with eval_results.json."""
    results: dict[str, list] = {}
    for problem in Problem.objects.order_by("level", "number"):
        name = f"level_{problem.level}_problem_{problem.number}_sample_0_kernel.py"
        (folder / name).write_text(f"class ModelNew:  # imported {problem.pk}\n    pass\n")
        entry = {"sample_id": 0, "compiled": True, "correctness": problem.number % 3 != 0, "runtime": 1.0}
        results.setdefault(f"level_{problem.level}_problem_{problem.number}", []).append(entry)
    (folder / "eval_results.json").write_text(json.dumps(results))
