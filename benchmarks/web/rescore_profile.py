"""Where one pass of the boards' re-scorer spends its time: marks one problem in each of N random
runs (an evaluation's speedup moved by 1%, in one transaction), then times one pass over them, with
its slowest SQL and a profile. Run with the re-scorer's settings, against a generated database:

    BOARD_RESCORER=1 DATABASE_URL=postgres://... .venv/bin/python -m benchmarks.web.rescore_profile 50 [seed]

It writes to that database (the speedups it moves stay moved)."""

from __future__ import annotations

import cProfile
import os
import pstats
import random
import sys
import time


def main(n: int, seed: int) -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django  # deferred: settings first

    django.setup()
    from django.db import connection, transaction  # deferred: after setup
    from django.test.utils import CaptureQueriesContext  # deferred: after setup

    from leaderboard.boards import rescoring  # deferred: after setup
    from leaderboard.models import DirtyRun, Evaluation, Kernel, Run  # deferred: after setup

    random.seed(seed)
    run_ids = random.sample(list(Run.objects.values_list("pk", flat=True)), n)
    with transaction.atomic():
        for run_id in run_ids:
            pk = Kernel.objects.filter(run_id=run_id).order_by("pk").values_list("latest_evaluation_id", flat=True)[0]
            evaluation = Evaluation.objects.get(pk=pk)
            evaluation.speedup = evaluation.speedup * 1.01 if evaluation.speedup else None
            evaluation.save(update_fields=["speedup"])
    print(f"marked {DirtyRun.objects.count()} runs")
    profile = cProfile.Profile()
    with CaptureQueriesContext(connection) as queries:
        started = time.perf_counter()
        profile.enable()
        done = rescoring.rescore_oldest(100)
        profile.disable()
        took = time.perf_counter() - started
    sql_ms = sum(float(q["time"]) for q in queries.captured_queries) * 1000
    print(
        f"re-scored {done} runs in {took * 1000:.0f} ms: {len(queries.captured_queries)} queries, {sql_ms:.0f} ms of SQL"
    )
    for query in sorted(queries.captured_queries, key=lambda q: -float(q["time"]))[:6]:
        print(f"  {float(query['time']) * 1000:7.1f} ms  {query['sql'][:150]}")
    pstats.Stats(profile).sort_stats("tottime").print_stats(12)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 50, int(sys.argv[2]) if len(sys.argv) > 2 else 1)
