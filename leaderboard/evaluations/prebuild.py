"""Look-ahead builds for a GPU host: compile the kernels of the next queued evaluations on the CPU,
so that the GPU worker that takes one finds it built and only loads it.

The builder (``prebuild_evaluations``, started by each GPU ``evalworker`` beside its sweeper) reads the
first ``depth`` job ids of its queues (RQ's public ``Queue.get_job_ids``), loads those evaluations'
kernels and options the way the job will (``jobs.load_inputs``), and hands them to a pool of
sandboxed build processes (``evaluation.builds.stage.BuildPool``) writing into the host's build cache.
The pool also finds each problem's sizes on the CPU (``evaluation.phases.sizes_ahead``: the
first operator on the meta device costs seconds, which the GPU would otherwise wait for in the
evaluation). A source already built, or being built by another builder of the host (its cache entry is locked),
costs nothing; a builder that dies leaves no half build behind (the cache publishes complete builds
only). See docs/workers.md, "Builds ahead of the GPUs", for why the look-ahead sits with the worker.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from concurrent.futures import Future

from django.db import close_old_connections
from rq.job import Job

from evaluation.builds.entry import needs_build
from evaluation.builds.stage import BuildOutcome, BuildPool
from leaderboard.evaluations.jobs import load_inputs
from leaderboard.evaluations.queue import eval_queue, redis_connection

log = logging.getLogger(__name__)


def upcoming_evaluations(queue_names: list[str], depth: int) -> list[int]:
    """Ids of the next ``depth`` evaluations waiting on the queues, in the order they will be taken."""
    ids: list[int] = []
    for name in queue_names:
        job_ids = eval_queue(name).get_job_ids(0, depth)
        for job in Job.fetch_many(job_ids, connection=redis_connection()):
            if job is not None and job.args and isinstance(job.args[0], int):
                ids.append(job.args[0])
    return ids[:depth]


def submit_upcoming(pool: BuildPool, queue_names: list[str], depth: int, seen: set[int]) -> int:
    """Submit the builds of the upcoming evaluations not submitted before; return how many."""
    submitted = 0
    for evaluation_id in upcoming_evaluations(queue_names, depth):
        if evaluation_id in seen:
            continue
        seen.add(evaluation_id)
        try:
            problem_source, kernel_source, config = load_inputs(evaluation_id)
        except Exception:  # the row went away or is malformed: the job itself will say so
            log.debug("prebuild: evaluation %s could not be loaded", evaluation_id, exc_info=True)
            continue
        if config.device == "cuda":  # the problem's sizes, off the GPU's critical path (once a problem)
            pool.find_sizes(problem_source, config)
        if needs_build(kernel_source):
            future = pool.submit(kernel_source, config)
            if isinstance(future, Future) and not getattr(future, "kb_logged", False):  # one future per source
                future.kb_logged = True  # type: ignore[attr-defined]
                future.add_done_callback(_log_outcome)
            submitted += 1
    return submitted


def _log_outcome(future: Future[BuildOutcome]) -> None:
    """One line per finished look-ahead build, its figures as JSON (seconds, steps, which shared
    headers it used): the GPU acceptance check reads build times from these lines."""
    try:
        outcome = future.result()
    except Exception as exc:  # a pool shut down under it
        log.info("prebuild: build ended without an outcome (%s)", type(exc).__name__)
        return
    figures = {k: v for k, v in outcome.to_dict().items() if k not in ("error", "log")}
    log.info("prebuild: built %s", json.dumps(figures, default=str))


def run_builder(
    pool: BuildPool, queue_names: list[str], depth: int, interval_s: float, keep_going: Callable[[], bool]
) -> None:
    """Poll the queues every ``interval_s`` and keep the pool fed, while ``keep_going()``."""
    seen: set[int] = set()
    while keep_going():
        close_old_connections()
        try:
            if pool.pending < pool.workers:
                n = submit_upcoming(pool, queue_names, depth, seen)
                if n:
                    log.info("prebuild: %s build(s) submitted ahead of the GPU", n)
        except Exception as exc:  # Redis or the database briefly away: try again next time
            log.warning("prebuild: could not read the queues (%s: %s)", type(exc).__name__, exc)
        time.sleep(interval_s)
