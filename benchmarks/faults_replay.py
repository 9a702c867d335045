"""Replay issue 20's cases 1, 2 and 5 (faults of the host), 3 and 4 (concurrent requests), and
issue 32's cases 1-8 (faults, round two) and issue 40's items 2 and 4-7 (round three), and print
what each did.

It runs the fault suite, whose tests are the replays (real Redis, real workers, real PostgreSQL for
case 5, a small tmpfs for case 1), with $KB_FAULTS_REPORT set so that each records what it measured,
then prints one line per case and the suite's verdict:

1. a full scratch disk: the reference kernel scored for real, its first attempt released with the
   host's reason and no verdict, the boards unchanged, then `correct` once space returns; a host
   error on every attempt ends `failed` with the host's reason; a worker below EVAL_MIN_FREE_MB
   starts nothing and /healthz says so (tests/integration/test_faults_disk.py, and the library's
   tests/evaluation/test_host_errors.py);
2. a retry runs on time after the worker holding RQ's scheduler lock is killed, and after Redis
   restarts with an append-only file (tests/integration/test_faults_retries.py);
5. PostgreSQL gone for 5 s under a live gunicorn: 503 with Retry-After, then 200
   (tests/integration/test_faults_database.py; PostgreSQL only).

and its cases 3 and 4 (concurrent requests; PostgreSQL only, SQLite serialises every writer):

3. two concurrent `verify` requests of one run: one set of evaluations (the second answers
   `skipped`), progress counting kernels (tests/api/test_concurrent_requests.py);
4. five concurrent imports naming a new model: all 2xx, one model, one run (same file).

Issue 32 (faults, round two):

1. cc1plus SIGKILLed mid-compile, in the look-ahead build and in the evaluation's own: no verdict,
   nothing cached, an entry an older release cached for a killed compiler dropped and rebuilt
   (tests/evaluation/test_killed_compiler.py, real g++ builds; the kill of test_build_stage.py);
2. PostgreSQL restarted under a heartbeat: it reconnects, the sweep keeps the attempt, its result is
   stored (tests/integration/test_faults_heartbeat.py; PostgreSQL only);
3. a sweeper's clock 10 minutes ahead and behind (Python's clock faked): no live attempt released,
   the dead one released, backoff by the database's clock (tests/integration/test_faults_clock.py);
4. scratch read-only (EROFS): the host claims nothing and says so; a host failing 3 evaluations in a
   row stops, gives back what it burned, and a healthy host finishes them
   (tests/integration/test_faults_host.py);
5-8. a verdict stored across a 20 s outage (PostgreSQL only) and a release across a database
   blip, the worker living through a Redis restart during a job, a verify while Redis hangs,
   retries at the front of the queue, one enqueue per retry across sweepers, Retry-After on
   /healthz (tests/integration/test_faults_small.py); a killed horse's sandbox folders removed
   (tests/evaluation/test_isolation.py).

Issue 40 (faults, round three):

1. published shared headers that failed every later C++ build: a kernel that includes
   torch/extension.h itself, built twice through the headers (tests/evaluation/test_pch.py), headers
   proven in the build sandbox before use, a compile error naming them rebuilt without them;
3. the host's own work never the kernel's: the build's deadline starts after the lock and header
   waits, a timeout on a loaded host or under a header build is the host's
   (tests/evaluation/test_host_time.py); a build waiting on another build's compile of the same unit
   keeps its own budget (tests/evaluation/test_unit_cache.py); a kernel's hang on a loaded host is
   the host's, no `timeout` verdict (tests/evaluation/test_failure_modes.py);

2. every write while the queue's Redis is down (the write and sign-in limits count there): 202 for
   submissions, the sign-in form answered, one log line, the sweep enqueues once Redis is back
   (tests/integration/test_faults_counters.py, a real redis-server stopped);
4. board marks written by a host 10 minutes off read fresh by the database's clock
   (tests/django/test_board_marks_clock.py); RQ's registry cleanup leaves a live job of a host
   600 s behind started and fails the dead one (tests/integration/test_faults_rq_cleanup.py);
5, 7. a host below its disk floor leaves the jobs in the queue for a host with room and logs its
   refusal once; a read-only scratch reads the same at every probe
   (tests/integration/test_faults_gate.py);
6. sandbox folders of dead process groups reaped, live ones kept
   (tests/evaluation/test_orphaned_sandboxes.py).

    .venv/bin/python benchmarks/faults_replay.py                                   # case 5 skipped
    PY=.venv/bin/python bash tests/with-postgres.sh .venv/bin/python benchmarks/faults_replay.py
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SUITE = [
    "tests/evaluation/test_host_errors.py",
    "tests/integration/test_faults_disk.py",
    "tests/integration/test_faults_retries.py",
    "tests/integration/test_faults_database.py",
    "tests/api/test_concurrent_requests.py",
    "tests/evaluation/test_killed_compiler.py",
    "tests/evaluation/test_build_stage.py::test_a_build_killed_midway_is_redone_by_the_next_evaluation",
    "tests/integration/test_faults_heartbeat.py",
    "tests/integration/test_faults_clock.py",
    "tests/integration/test_faults_host.py",
    "tests/integration/test_faults_small.py",
    "tests/evaluation/test_isolation.py::test_the_folders_of_a_killed_work_horse_are_removed",
    "tests/integration/test_faults_counters.py",
    "tests/django/test_board_marks_clock.py",
    "tests/integration/test_faults_rq_cleanup.py",
    "tests/integration/test_faults_gate.py",
    "tests/evaluation/test_orphaned_sandboxes.py",
    "tests/evaluation/test_pch.py",
    "tests/evaluation/test_host_time.py",
    "tests/evaluation/test_unit_cache.py::test_a_build_waiting_for_another_builds_unit_keeps_its_own_budget",
    "tests/evaluation/test_unit_cache.py::test_a_wait_for_another_builds_compile_of_the_unit_moves_the_builds_deadline",
    "tests/evaluation/test_failure_modes.py::test_hang_on_a_loaded_host_is_the_hosts_not_a_verdict",
]


def main() -> int:
    report = Path(tempfile.mkdtemp(prefix="kb-faults-")) / "report.jsonl"
    env = {**os.environ, "KB_FAULTS_REPORT": str(report)}
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "pytest", *SUITE, "-q", "-rfEs", "-p", "no:cacheprovider"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
    )
    elapsed = time.monotonic() - started
    database = "PostgreSQL" if os.environ.get("DATABASE_URL", "").startswith("postgres") else "SQLite"
    print(f"# issue 20, 32 and 40 faults replayed ({database}; {elapsed:.0f} s)")
    for line in report.read_text().splitlines() if report.exists() else []:
        entry = json.loads(line)
        case = entry.pop("case")
        print(f"- {case}: " + "; ".join(f"{key} = {value}" for key, value in entry.items()))
    summary = [line for line in done.stdout.splitlines() if line.startswith(("SKIPPED", "FAILED", "ERROR"))]
    print("\n".join(summary))
    print(done.stdout.strip().splitlines()[-1] if done.stdout.strip() else done.stderr[-2000:])
    return done.returncode


if __name__ == "__main__":
    sys.exit(main())
