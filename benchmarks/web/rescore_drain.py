"""How fast the boards' re-scorer drains a backlog of runs each marked by one problem (what 50
results a second, each in a different run, leave behind): marks N random runs (an evaluation's
speedup moved by 1% in each, in one transaction, through the model signals as a worker's store
marks it), then runs the re-scorer's passes (`rescorer.rescore_pass`, batches of 100) until none is
left, and prints runs a second, database time and CPU time of this process. Against a generated
database, with the re-scorer's settings:

    BOARD_RESCORER=1 DATABASE_URL=postgres://... .venv/bin/python -m benchmarks.web.rescore_drain 2000 [seed]

It writes to that database (the speedups it moves stay moved)."""

from __future__ import annotations

import os
import random
import sys
import time


def main(n: int, seed: int) -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django  # deferred: settings first

    django.setup()
    from django.db import transaction  # deferred: after setup

    from leaderboard.boards import rescorer  # deferred: after setup
    from leaderboard.models import DirtyRun, Evaluation, Kernel, Run  # deferred: after setup

    rng = random.Random(seed)
    run_ids = rng.sample(list(Run.objects.values_list("pk", flat=True)), n)
    firsts = Kernel.objects.filter(run_id__in=run_ids, sample_index=0, latest_evaluation__speedup__isnull=False)
    chosen = {}
    for run_id, evaluation_id in firsts.order_by("run_id", "problem_id").values_list("run_id", "latest_evaluation_id"):
        chosen.setdefault(run_id, evaluation_id)
    with transaction.atomic():
        for evaluation in Evaluation.objects.filter(pk__in=list(chosen.values())):
            evaluation.speedup *= 1.01
            evaluation.save(update_fields=["speedup"])
    marked = DirtyRun.objects.count()
    cpu, started, passes, db = time.process_time(), time.perf_counter(), 0, 0.0
    while (done := rescorer.rescore_pass()).runs:
        passes, db = passes + 1, db + done.db_seconds
    took, cpu = time.perf_counter() - started, time.process_time() - cpu
    print(
        f"{marked} runs marked by one problem each, drained in {took:.2f} s ({marked / took:.0f} runs/s) by "
        f"{passes} passes: database {db:.2f} s, this process's CPU {cpu:.2f} s "
        f"({took / marked * 1000:.1f} ms a run, {db / marked * 1000:.1f} of database time); load average "
        f"{os.getloadavg()[0]:.1f}"
    )


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 2000, int(sys.argv[2]) if len(sys.argv) > 2 else 1)
