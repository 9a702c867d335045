"""Replay issue 20's cases 1, 2 and 5 (faults of the host), 3 and 4 (concurrent requests) and print
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
]


def main() -> int:
    report = Path(tempfile.mkdtemp(prefix="kb-faults-")) / "report.jsonl"
    env = {**os.environ, "KB_FAULTS_REPORT": str(report)}
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "pytest", *SUITE, "-q", "-rfEs", "-p", "no:cacheprovider"],
                          cwd=REPO, env=env, capture_output=True, text=True)
    elapsed = time.monotonic() - started
    database = "PostgreSQL" if os.environ.get("DATABASE_URL", "").startswith("postgres") else "SQLite"
    print(f"# issue 20 faults replayed ({database}; {elapsed:.0f} s)")
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
