"""How long the run page and its API resources take for a large run, and how many queries.

    .venv/bin/python benchmarks/run_page_timing.py [--problems 270] [--samples 5] [--repeat 20]

Builds a throwaway SQLite database (never the site's) with one problem set of N problems over
levels 1-4, two runs of N x S kernels each with a finished evaluation (a mix of correct, incorrect
and failed), then times GET /runs/<id>/, /runs/<id>/?compare=<other>, and the API's progress,
problems and scores resources with Django's test client (p50 and p95 over --repeat requests,
after one warm-up), and prints the query count of each.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def setup_django(db_path: Path) -> None:
    os.environ["DATABASE_URL"] = f"sqlite:///{db_path}"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    sys.path.insert(0, str(ROOT))
    import django  # deferred: settings come from the environment set just above

    django.setup()


def build(problems: int, samples: int) -> tuple[int, int]:
    from django.core.management import call_command  # deferred: needs django.setup()

    from leaderboard.models import Evaluation, Kernel, LanguageModel, Run  # deferred: needs django.setup()
    from problems.models import Hardware, Problem, ProblemSet  # deferred: needs django.setup()

    call_command("migrate", verbosity=0)
    rng = random.Random(13)
    problem_set = ProblemSet.objects.create(slug="big", name="Big")
    split = {1: 0.37, 2: 0.37, 3: 0.19, 4: 0.07}
    rows, number = [], {level: 0 for level in split}
    for index in range(problems):
        level = 1 if index < problems * 0.37 else 2 if index < problems * 0.74 else 3 if index < problems * 0.93 else 4
        number[level] += 1
        rows.append(Problem(problem_set=problem_set, level=level, number=number[level], name=f"P{index}", source="x"))
    Problem.objects.bulk_create(rows)
    hardware = Hardware.objects.create(slug="h200", name="H200")
    run_ids = []
    for name in ("A", "B"):
        run = Run.objects.create(
            model=LanguageModel.objects.create(name=name), problem_set=problem_set, hardware=hardware
        )
        kernels = Kernel.objects.bulk_create(
            Kernel(run=run, problem=p, sample_index=s, source=f"k{p.pk}-{s}", source_hash=f"{p.pk}-{s}-{name}")
            for p in Problem.objects.filter(problem_set=problem_set)
            for s in range(samples)
        )
        evaluations = []
        for kernel in kernels:
            roll = rng.random()
            correct = roll < 0.6
            evaluations.append(Evaluation(
                kernel=kernel, hardware=hardware, state="done" if roll < 0.97 else "failed",
                status=("correct" if correct else "incorrect") if roll < 0.97 else "",
                compiled=roll < 0.9, correct=correct, speedup=rng.uniform(0.3, 3.0) if correct else None,
            ))  # fmt: skip
        Evaluation.objects.bulk_create(evaluations)
        for kernel, evaluation in zip(kernels, evaluations, strict=True):
            kernel.latest_evaluation = evaluation if evaluation.state == "done" else None
        Kernel.objects.bulk_update(kernels, ["latest_evaluation"])
        run_ids.append(run.pk)
    return run_ids[0], run_ids[1]


def measure(client, url: str, repeat: int) -> tuple[float, float, int]:
    from django.db import connection  # deferred: needs django.setup()
    from django.test.utils import CaptureQueriesContext  # deferred: needs django.setup()

    client.get(url)
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        with CaptureQueriesContext(connection) as queries:
            response = client.get(url)
        times.append((time.perf_counter() - start) * 1000)
        assert response.status_code == 200, (url, response.status_code)
    times.sort()
    return statistics.median(times), times[max(0, int(len(times) * 0.95) - 1)], len(queries.captured_queries)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--problems", type=int, default=270)
    parser.add_argument("--samples", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        setup_django(Path(tmp) / "db.sqlite3")
        from django.conf import settings  # deferred: needs django.setup()
        from django.test import Client  # deferred: needs django.setup()

        settings.ALLOWED_HOSTS = ["testserver"]
        settings.STORAGES = {
            **settings.STORAGES,
            "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
        }
        run, other = build(args.problems, args.samples)
        client = Client()
        print(
            f"run of {args.problems} problems x {args.samples} samples ({args.problems * args.samples} kernels), SQLite"
        )
        for url in (f"/runs/{run}/", f"/runs/{run}/?compare={other}", f"/api/v1/runs/{run}/progress/",
                    f"/api/v1/runs/{run}/problems/", f"/api/v1/runs/{run}/scores/"):  # fmt: skip
            p50, p95, queries = measure(client, url, args.repeat)
            print(f"{url:<32} p50 {p50:7.1f} ms  p95 {p95:7.1f} ms  {queries:3d} queries")


if __name__ == "__main__":
    main()
