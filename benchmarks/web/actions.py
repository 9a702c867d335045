"""The web benchmark's in-process parts, run as `python -m benchmarks.web.bench ACTION` from the
repository root (benchmarks/web/run.sh drives it; `make bench-web`). The benchmark drives the site
(its models, commands and test client); the site never imports the benchmark.

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
- `marks --stop-file F [--seconds S]`: the runs waiting for the background re-scorer, sampled
  while the writers write (until F exists), then how long until none waits (at most S seconds).
"""

from __future__ import annotations

import argparse
import io
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import TextIO

from django.contrib.auth.models import Group, User
from django.core.management import call_command
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from benchmarks.web import churn, dataset
from benchmarks.web.http_bench import BOARD_PAGES
from leaderboard.boards import rescoring as board_rescoring
from leaderboard.models import Kernel, LanguageModel, Run
from problems.models import Problem

# Queries a page may cost, whatever the data size (the smoke test's bound).
QUERY_BOUND = 25


def main(argv: list[str] | None = None, out: TextIO = sys.stdout) -> None:
    args = _parser().parse_args(argv)

    def say(line: str) -> None:
        """A line at once, through a pipe too (churn_bench waits for the writer's first)."""
        out.write(line + "\n")
        out.flush()

    ACTIONS[args.action](args, say)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.web.bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("action", choices=sorted(ACTIONS))
    parser.add_argument("--scale", default="20k", help="kernels (= evaluations): 20k, 1.3M, ...")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--check", action="store_true", help="fail when a URL exceeds the query bound")
    parser.add_argument("--rate", type=float, default=1.0, help="writer: evaluations stored per second")
    parser.add_argument("--seconds", type=float, help="writer: stop after this long; marks: wait this long at most")
    parser.add_argument("--count", type=int, help="writer: stop after this many")
    parser.add_argument("--stop-file", default="", help="writer, marks: stop once this file exists")
    parser.add_argument("--base", help="visible: the served site, http://host:port")
    parser.add_argument("--trials", type=int, default=3, help="visible: results stored and watched")
    return parser


def generate(args, say) -> None:
    if Run.objects.exists():
        raise SystemExit("the database already has runs: the benchmark needs an empty one")
    scale = dataset.parse_scale(args.scale)
    say(f"generating {scale:,} kernels and evaluations ({dataset.Shape.of(scale)})")
    timings = dataset.generate(scale, args.seed, write=say)
    started = time.monotonic()
    call_command("rebuild_boards", stdout=_Lines(say))
    timings["rebuild_boards"] = time.monotonic() - started
    for phase, seconds in timings.items():
        say(f"  {phase}: {seconds:.1f} s")


def urls(args, say) -> None:
    for url in bench_urls():
        say(url)


def session(args, say) -> None:
    """A signed-in reviewer's session cookie, for timing the review queue over HTTP."""
    client = Client()
    client.force_login(reviewer())
    say(f"sessionid={client.cookies['sessionid'].value}")


def queries(args, say) -> None:
    client = Client(HTTP_HOST="localhost", HTTP_X_FORWARDED_PROTO="https", secure=True)
    client.force_login(reviewer())
    over = []
    for url in bench_urls():
        client.get(url)  # warm-up: caches, the read model's dirty runs
        with CaptureQueriesContext(connection) as captured:
            status = client.get(url).status_code
        say(f"{len(captured):4d} queries  {status}  {url}")
        if len(captured) > QUERY_BOUND or status != 200:
            over.append(url)
    if args.check and over:
        raise SystemExit(f"over {QUERY_BOUND} queries or not 200: {', '.join(over)}")


def writes(args, say) -> None:
    run = Run.objects.order_by("pk").first()
    seconds = []
    for _ in range(20):
        started = time.monotonic()
        board_rescoring.refresh_runs([run.pk])
        seconds.append(time.monotonic() - started)
    say(f"re-scoring one run ({run.n_kernels} kernels): median {statistics.median(seconds) * 1000:.1f} ms")
    with tempfile.TemporaryDirectory() as folder, CaptureQueriesContext(connection) as captured:
        write_run_folder(Path(folder))
        started = time.monotonic()
        call_command("import_run", folder, "--model", "model-0", "--hardware", "h100", stdout=_Lines(say))
        say(f"importing a 270-kernel run: {time.monotonic() - started:.2f} s, {len(captured)} queries")


def writer(args, say) -> None:
    churn.write(args.rate, args.seconds, args.count, args.seed, say, args.stop_file)


def visible(args, say) -> None:
    seconds = churn.visible(args.base, args.trials, limit=30.0, out=say)
    say(f"visible after: median {statistics.median(seconds):.2f} s, max {max(seconds):.2f} s")


def marks(args, say) -> None:
    churn.backlog(args.stop_file, args.seconds or 60.0, say)


ACTIONS = {f.__name__: f for f in (generate, urls, session, queries, writes, writer, visible, marks)}


class _Lines(io.TextIOBase):
    """A command's stdout as lines said (call_command writes through it)."""

    def __init__(self, say) -> None:
        self.say = say

    def write(self, text: str) -> int:
        for line in text.splitlines():
            self.say(line)
        return len(text)


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
