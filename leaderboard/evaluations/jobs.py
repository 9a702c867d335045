"""The RQ job function. Jobs are module-level functions taking ids (never model instances), so that
a job survives being serialised, retried, or run by another worker on another host.

`leaderboard.jobs.run_evaluation_job`, the job's old dotted path, stays as an alias for one release
so that jobs queued before the move still run.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.db import close_old_connections
from django.utils.module_loading import import_string

from evaluation import EvaluationConfig
from leaderboard.evaluations.attempts import (
    Claim,
    Heartbeat,
    claim,
    current_worker_name,
    release,
    store_result,
    with_db_retries,
)
from leaderboard.models import Evaluation

log = logging.getLogger(__name__)


def run_evaluation_job(evaluation_id: int) -> str:
    """The RQ job: one attempt at the evaluation, safe to run any number of times. Returns what
    happened: 'skipped' (not queued, or claimed elsewhere), 'done', 'dropped' (the attempt was given
    up meanwhile) or 'retrying'.

    Phases: claim the attempt -> load the sources and options (load_inputs) -> score them
    (EVAL_FUNCTION) -> store the verdict, all under a heartbeat. A failure of our side after the
    claim releases the attempt (retried after a backoff, or failed)."""
    close_old_connections()
    worker_name = current_worker_name()
    t0 = time.monotonic()
    c = claim(evaluation_id, worker_name, os.environ.get("RQ_JOB_ID", ""))
    claim_s = time.monotonic() - t0
    if c is None:
        log.info("evaluation %s: nothing to do (not queued, or claimed elsewhere)", evaluation_id)
        return "skipped"
    log.info("evaluation %s: attempt %s on %s", evaluation_id, c.attempt, worker_name)
    try:
        with Heartbeat(c, settings.EVAL_HEARTBEAT_S):
            stored = _evaluate_and_store(c, {"db_claim": claim_s})
    except Exception as exc:
        log.exception("evaluation %s: attempt %s failed on our side", evaluation_id, c.attempt)
        release(c, f"{type(exc).__name__}: {exc}")
        return "retrying"
    return "done" if stored else "dropped"


def _evaluate_and_store(c: Claim, worker_stages: dict[str, float]) -> bool:
    t1 = time.monotonic()
    problem_source, kernel_source, config = load_inputs(c.evaluation_id)
    worker_stages["db_load"] = time.monotonic() - t1
    t2 = time.monotonic()
    result = evaluation_function()(problem_source, kernel_source, config)
    worker_stages["evaluate"] = time.monotonic() - t2
    data = result.to_dict() if hasattr(result, "to_dict") else dict(result)
    return with_db_retries(lambda: store_result(c, data, worker_stages))


def evaluation_function() -> Callable[..., Any]:
    """The function that scores a kernel: `evaluation.evaluate` unless EVAL_FUNCTION names another
    (the integration tests use a cheap fake to test the queueing, not the scoring)."""
    return import_string(settings.EVAL_FUNCTION)


def load_inputs(evaluation_id: int) -> tuple[str, str, EvaluationConfig]:
    """The problem's and the kernel's sources and the scoring options of an evaluation."""
    ev = Evaluation.objects.select_related("kernel__problem", "kernel__run__rules", "hardware", "rules").get(
        pk=evaluation_id
    )
    problem, run = ev.kernel.problem, ev.kernel.run
    # The rules the evaluation was asked for (its run's when it was queued), as KernelBench applies
    # them: one tolerance, as atol and rtol, for the run's precision; all trials must match.
    rules = ev.rules or run.rules
    tolerance = rules.tolerance(run.precision)
    options: dict[str, Any] = dict(
        device="cuda" if ev.hardware.kind == ev.hardware.Kind.GPU else "cpu",
        timeout_s=float(settings.EVAL_TIMEOUT_S),
        atol=tolerance,
        rtol=tolerance,
        correctness_trials=rules.correctness_trials,
        precision=run.precision,  # the run's setting (KernelBench's precision option)
        # The site's private files (database, secret key, uploads) are not even visible to kernels.
        hide_paths=(str(settings.VAR_DIR),),
        cpus=settings.EVAL_CPUS,
    )
    # Passed on only when set, so that the library's own defaults apply otherwise.
    optional = {
        "correctness_trials": settings.EVAL_CORRECTNESS_TRIALS,
        "timing_trials": settings.EVAL_TIMING_TRIALS,
        "size_scale": settings.EVAL_SIZE_SCALE,
        "memory_limit_mb": settings.EVAL_MEMORY_LIMIT_MB,
    }
    options.update({key: int(value) for key, value in optional.items() if value is not None})
    return problem.source, ev.kernel.source, EvaluationConfig(**options)


_load = load_inputs  # the name tests used before the builder needed it (leaderboard/evaluations/prebuild.py)
