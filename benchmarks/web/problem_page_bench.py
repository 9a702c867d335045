"""The problem page on a generated database: its first visit, then 20 repeat visits (p50, p95), in
this process through Django's test client (no HTTP server; the cache is the settings' own).

    DATABASE_URL=postgres://... .venv/bin/python -m benchmarks.web.problem_page_bench 1 2 3

The database comes from `python -m benchmarks.web.bench generate --scale 1.3M` (benchmarks/web/run.sh
makes one and removes it; BENCH_DATABASE_URL keeps one)."""

from __future__ import annotations

import os
import statistics
import sys
import time


def main(problem_ids: list[int]) -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django  # deferred: settings first

    django.setup()
    from django.test import Client  # deferred: after setup

    from leaderboard.models import Kernel  # deferred: after setup

    client = Client(HTTP_HOST="localhost")
    for pk in problem_ids:
        url = f"/problems/{pk}/"
        started = time.perf_counter()
        assert client.get(url).status_code == 200, url
        first = (time.perf_counter() - started) * 1000
        times = []
        for _ in range(20):
            started = time.perf_counter()
            assert client.get(url).status_code == 200, url
            times.append((time.perf_counter() - started) * 1000)
        times.sort()
        kernels = Kernel.objects.filter(problem_id=pk).count()
        print(f"problem {pk} ({kernels} kernels): first {first:.1f} ms, then p50 {statistics.median(times):.1f} ms, "
              f"p95 {times[18]:.1f} ms")


if __name__ == "__main__":
    main([int(arg) for arg in sys.argv[1:]] or [1])
