"""The boards' background re-scorer: where the site runs one (BOARD_RESCORER), the process that
re-scores runs as results land (leaderboard/boards/marks.py, "How it stays current"), and the
only one: pages and the API never re-score, so a mark waits here however old it is.

`run` loops until told to stop: take the oldest marked runs that no other transaction holds, at
most `batch`, and re-score them in one transaction (`rescoring.rescore_oldest`); wait `poll` seconds
when it re-scored less than a full batch, go on at once when it is behind. More than one re-scorer
is harmless: each skips the runs another holds (FOR UPDATE SKIP LOCKED), and a run re-scored twice
is stored the same. A database that goes away is waited out, never a reason to exit. Every few
seconds it keeps the standard boards built (leaderboard/ops/kept_boards.py), in a thread of its
own, never between passes.

Each pass is timed, and its database time (the time its queries took) measured, so that the cost
of keeping the boards current can be stated per stored result (benchmarks/web/churn_bench.py)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from django.db import OperationalError, connection, connections

from leaderboard.boards import rescoring as board_rescoring

log = logging.getLogger(__name__)

POLL_SECONDS = 0.25  # idle wait between passes: a mark waits at most this long for its batch
BATCH = 100  # runs per pass: one transaction holds their row locks, so not too many at once
OUTAGE_SECONDS = 5.0  # wait after the database refused a pass


@dataclass(frozen=True)
class Pass:
    """One pass of the re-scorer: when it started (epoch seconds), the runs it re-scored (not those
    it looked at: runs another transaction holds are not taken), how long it took and how much of
    that its queries took."""

    started: float
    runs: int
    seconds: float
    db_seconds: float


class QueryClock:
    """A connection execute wrapper that adds up the time its queries take (database time, as the
    client sees it: round trips included, Python around them not)."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.queries = 0

    def __call__(self, execute, sql, params, many, context):
        started = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            self.seconds += time.perf_counter() - started
            self.queries += 1


def rescore_pass(batch: int = BATCH) -> Pass:
    """Re-score the oldest marked runs, at most `batch` of them, timed."""
    started, clock = time.time(), QueryClock()
    with connection.execute_wrapper(clock):
        runs = board_rescoring.rescore_oldest(batch)
    return Pass(started, runs, time.time() - started, clock.seconds)


#: What keeps the standard boards built (leaderboard/ops/kept_boards.py's sweep): given where the
#: last sweep stopped and whether stale boards may be rebuilt, where the next one starts. It asks the
#: page views for the boards, so the command that runs the re-scorer hands it in from above.
Sweep = Callable[[int, bool], int]


class Sweeps:
    """The sweeps that keep the standard boards built, every `every` seconds (never when 0 or
    without a `sweep`), each going on where the last stopped. `in_thread` (the re-scorer's loop):
    each sweep runs in a thread of its own, with its own connection, so that re-scoring never waits
    for one: a sweep builds boards for up to its budget (2 s, more when one build takes longer:
    7 s a board at 13 M before boards were ranked by the database), and between passes a result
    marked meanwhile waited that long for its re-scoring."""

    def __init__(self, every: float, sweep: Sweep | None, in_thread: bool = False) -> None:
        self.every = every if sweep is not None else 0.0
        self.sweep = sweep
        self.next_at = 0.0
        self.cursor = 0
        self.in_thread = in_thread
        self.thread: threading.Thread | None = None

    def when_due(self, behind: bool) -> None:
        """Sweep if it is time; `behind` (the last pass took a full batch): build only missing boards."""
        if not self.every or self.sweep is None or time.monotonic() < self.next_at:
            return
        if not self.in_thread:
            self._sweep(behind)
        elif self.thread is None or not self.thread.is_alive():
            self.thread = threading.Thread(target=self._sweep_apart, args=(behind,), name="board-sweep", daemon=True)
            self.thread.start()

    def _sweep(self, behind: bool) -> None:
        try:
            self.cursor = self.sweep(self.cursor, not behind)
        finally:
            self.next_at = time.monotonic() + self.every

    def _sweep_apart(self, behind: bool) -> None:
        try:
            self._sweep(behind)
        except Exception:  # the boards stay as kept; the next sweep tries again
            log.exception("keeping the standard boards built failed")
        finally:
            connections.close_all()  # this thread's own connections


def run(
    stop: threading.Event,
    poll: float = POLL_SECONDS,
    batch: int = BATCH,
    report: Callable[[Pass], None] | None = None,
    sweep_every: float = 0.0,
    sweep: Sweep | None = None,
) -> None:
    """Re-score marked runs until `stop` is set; `report` is told of every pass that found any. With
    `sweep_every` (seconds) and a `sweep`, keep the standard boards built that often."""
    sweeps = Sweeps(sweep_every, sweep, in_thread=True)
    while not stop.is_set():
        try:
            if not connection.in_atomic_block:  # (a test's transaction: its connection must stay)
                connection.close_if_unusable_or_obsolete()  # a connection the database dropped, or too old
            done = rescore_pass(batch)
            sweeps.when_due(behind=done.runs >= batch)
        except OperationalError as exc:  # a deadlock or a lock timeout: again soon; the database down: later
            wait = poll if connection.is_usable() else OUTAGE_SECONDS
            log.warning("re-scoring the boards failed, retrying in %g s: %s", wait, exc)
            if wait == OUTAGE_SECONDS:
                connection.close()
            stop.wait(wait)
            continue
        if done.runs and report is not None:
            report(done)
        if done.runs < batch:
            stop.wait(poll)
