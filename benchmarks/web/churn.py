"""The web benchmark's writer and freshness probe (issue 22), run as `python -m benchmarks.web.bench writer`
and `... visible` while benchmarks/web/churn_bench.py times the boards over HTTP.

- `writer`: stores finished evaluations through the GPU worker's own path (attempts.claim, then
  attempts.store_result, which marks the run for the background re-scorer), each into a different
  run, at a steady rate; prints its database time per result (the time its queries took) with the
  time each result was stored, for churn_bench.py to add each result's share of the re-scoring.
- `visible`: stores one result that changes a number the level-1 board shows (a failed sample-0
  kernel of the top run becomes correct) and polls the board over HTTP until it shows it.
- `marks`: the runs marked and waiting for the background re-scorer, sampled each second while the
  writers write, then how long the re-scorer takes to re-score them all once they stop.
"""

from __future__ import annotations

import json
import os
import random
import statistics
import time
import urllib.request
from collections.abc import Callable
from itertools import cycle

from django.db import IntegrityError, connection

from leaderboard.boards import stored as board_stored
from leaderboard.boards.rescorer import QueryClock
from leaderboard.evaluations import attempts
from leaderboard.models import DirtyRun, Evaluation, Kernel, Run

WORKER = "bench-writer"


def store_one(kernel_id: int, hardware_id: int, verdict: dict) -> tuple[float, float]:
    """Queue a new evaluation of the kernel and store `verdict` as a GPU worker would: (seconds it
    took, seconds the worker's queries took: the claim and the store, after-commit work included)."""
    started = time.monotonic()
    evaluation = Evaluation.objects.create(kernel_id=kernel_id, hardware_id=hardware_id)  # as enqueued
    clock = QueryClock()
    with connection.execute_wrapper(clock):
        claim = attempts.claim(evaluation.pk, WORKER)
        assert claim is not None and attempts.store_result(claim, verdict)
    return time.monotonic() - started, clock.seconds


def random_verdict(rng: random.Random) -> dict:
    if rng.random() < 0.55:
        return {"status": "correct", "compiled": True, "correct": True, "speedup": rng.lognormvariate(0, 0.6)}
    return {"status": "incorrect", "compiled": True, "correct": False}


def write(
    rate: float, seconds: float | None, count: int | None, seed: int, out: Callable[[str], None], stop_file: str = ""
) -> None:
    """Store evaluations at `rate` per second, each into the next run (runs in a shuffled cycle),
    for `seconds` or `count` writes, until `stop_file` exists, or until interrupted; prints what it
    achieved."""
    rng = random.Random(seed)
    runs = list(Run.objects.values_list("pk", "hardware_id"))
    rng.shuffle(runs)
    took: list[float] = []
    stored: list[tuple[float, float]] = []  # (epoch seconds once stored, database ms)
    out("writing")  # the first line: ready (benchmarks/web/churn_bench.py waits for it)
    started = time.monotonic()
    try:
        for n, (run_id, hardware_id) in enumerate(cycle(runs)):
            if (count is not None and n >= count) or (seconds is not None and time.monotonic() - started >= seconds):
                break
            if stop_file and os.path.exists(stop_file):  # a signal could land inside a query
                break
            if rate > 0:
                time.sleep(max(0.0, started + n / rate - time.monotonic()))
            kernels = list(Kernel.objects.filter(run_id=run_id).values_list("pk", flat=True))
            if kernels:
                try:
                    seconds_taken, db_seconds = store_one(rng.choice(kernels), hardware_id, random_verdict(rng))
                except IntegrityError:  # another writer has this kernel pending (one pending per kernel)
                    continue
                took.append(seconds_taken)
                stored.append((round(time.time(), 3), round(db_seconds * 1000, 3)))
    except KeyboardInterrupt:
        pass
    elapsed = time.monotonic() - started
    timing = f"; store p50 {statistics.median(took) * 1000:.0f} ms, max {max(took) * 1000:.0f} ms" if took else ""
    out(f"writer: {len(took)} evaluations stored in {elapsed:.1f} s ({len(took) / elapsed:.2f}/s){timing}")
    out("stored " + json.dumps(stored))  # read by churn_bench.py


def _get_json(url: str) -> dict:
    request = urllib.request.Request(url, headers={"X-Forwarded-Proto": "https"})
    with urllib.request.urlopen(request, timeout=60) as response:
        return json.loads(response.read())


BOARDS = {  # URL: how to read a run's correct share from its JSON
    "/levels/1/?export=json": lambda body, run_id: next(
        (row["correct"] for row in body["rows"] if row["run_id"] == run_id), None
    ),
    "/api/v1/leaderboard/?level=1": lambda body, run_id: next(
        (row["summary"]["correct_rate"] for row in body["results"] if row["run"]["id"] == run_id), None
    ),
}


def visible(base: str, trials: int, limit: float, out: Callable[[str], None]) -> list[float]:
    """Seconds from store_result's return until each board shows the new number, per trial and board."""
    seconds = []
    for trial in range(trials):
        body = _get_json(base + "/levels/1/?export=json")
        run_id = body["rows"][0]["run_id"]
        kernel = (
            Kernel.objects.filter(run_id=run_id, problem__level=1, sample_index=0)
            .exclude(latest_evaluation__correct=True)
            .values_list("pk", "run__hardware_id")
            .first()
        )
        if kernel is None:
            out(f"trial {trial}: run {run_id} has no failed level-1 kernel left")
            continue
        before = {url: read(_get_json(base + url), run_id) for url, read in BOARDS.items()}
        store_one(*kernel, {"status": "correct", "compiled": True, "correct": True, "speedup": 50.0})
        stored = time.monotonic()
        waiting = dict(BOARDS)
        while waiting and time.monotonic() - stored < limit:
            for url, read in list(waiting.items()):
                if read(_get_json(base + url), run_id) != before[url]:
                    seconds.append(time.monotonic() - stored)
                    out(f"trial {trial}: {url} showed the result after {seconds[-1]:.2f} s")
                    del waiting[url]
            time.sleep(0.05)
        for url in waiting:
            seconds.append(float("inf"))
            out(f"trial {trial}: {url} did not show the result within {limit:.0f} s")
    return seconds


def backlog(stop_file: str, drain: float, out: Callable[[str], None]) -> None:
    """Sample the marks waiting for the re-scorer (runs, and how long the oldest has waited) each
    second until `stop_file` exists (the writers stopped), then wait at most `drain` seconds for
    none to be left; print both."""
    samples: list[tuple[int, float]] = []

    def sample() -> tuple[int, float]:
        return DirtyRun.objects.filter(failed_at__isnull=True).count(), board_stored.oldest_mark_seconds()

    while not (stop_file and os.path.exists(stop_file)):
        samples.append(sample())
        time.sleep(1.0)
    stopped, (left, oldest) = time.monotonic(), sample()
    if samples:
        counts, ages = [n for n, _ in samples], [age for _, age in samples]
        out(
            f"marks waiting for the re-scorer while writing ({len(samples)} samples, 1 s apart): runs median "
            f"{statistics.median(counts):g}, max {max(counts)}; oldest mark waited median {statistics.median(ages):.1f} s, "
            f"max {max(ages):.1f} s"
        )
    out(f"when the writers stopped: {left} runs marked, the oldest for {oldest:.1f} s")
    while left and time.monotonic() - stopped < drain:
        time.sleep(0.25)
        left, oldest = sample()
    if left:
        out(f"still {left} runs marked {drain:g} s after the writers stopped (the oldest for {oldest:.1f} s)")
    else:
        out(f"all re-scored {time.monotonic() - stopped:.1f} s after the writers stopped")
