"""What `verify` costs: an imported run of N kernels (default 2,000) on SQLite in a temporary
folder, then verify_run, timed and its queries counted. Without Redis every enqueue fails fast and
is left to the sweep, so the figure is the database's share plus one failed enqueue per kernel.

    .venv/bin/python benchmarks/verify_cost.py [N]
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    folder = tempfile.mkdtemp(prefix="kb-verify-")
    os.environ.update(
        DATABASE_URL=f"sqlite:///{folder}/db.sqlite3",
        KB_VAR_DIR=f"{folder}/var",
        DJANGO_SETTINGS_MODULE="config.settings",
    )
    os.environ.pop("REDIS_URL", None)
    import django  # deferred: settings come from the environment set above

    django.setup()
    from django.core.management import call_command
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from leaderboard.ingest.archives import Bundle, KernelFile
    from leaderboard.ingest.run_import import RunSpec, store_run, verify_run
    from problems.models import Hardware, Problem, ProblemSet

    call_command("migrate", verbosity=0)
    problem_set = ProblemSet.objects.create(slug="b", name="Bench")
    Problem.objects.bulk_create(
        Problem(problem_set=problem_set, level=1, number=p, name=f"p{p}", source="x = 1\n") for p in range(1, n + 1)
    )
    hardware = Hardware.objects.create(slug="cpu", name="CPU", kind="cpu")
    files = [KernelFile(f"k{p}", 1, p, 0, f"class ModelNew:\n    pass\n# {p}\n") for p in range(1, n + 1)]
    run = store_run(
        RunSpec(model="M", hardware=hardware, problem_set=problem_set, name="r"),
        Bundle(files),
        by="benchmarks/verify_cost.py",
    ).run
    start = time.perf_counter()
    with CaptureQueriesContext(connection) as queries:
        queued, _ = verify_run(run, by="benchmarks/verify_cost.py")
    print(
        f"verify_run of {n} kernels: {time.perf_counter() - start:.2f} s, {len(queries)} queries, {len(queued)} queued"
    )


if __name__ == "__main__":
    main()
