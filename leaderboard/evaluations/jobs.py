"""The RQ job functions: an evaluation's attempt, and the instruments run after its verdict. Jobs are module-level functions taking ids (never model instances), so that
a job survives being serialised, retried, or run by another worker on another host.

`leaderboard.jobs.run_evaluation_job`, the job's old dotted path, stays as an alias for one release
so that jobs queued before the move still run.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from functools import partial
from typing import Any

from django.conf import settings
from django.db import close_old_connections
from django.utils.module_loading import import_string

from evaluation import INFRASTRUCTURE_ERROR, EvaluationConfig
from evaluation.sandbox.host_errors import counts_against_host, host_error
from leaderboard.evaluations import follow_up, host_space
from leaderboard.evaluations.attempts import (
    Claim,
    Heartbeat,
    claim,
    current_worker_name,
    defer,
    release,
    store_result,
    with_db_retries,
)
from leaderboard.evaluations.cores import timing_cpus
from leaderboard.models import Evaluation

log = logging.getLogger(__name__)


def run_evaluation_job(evaluation_id: int) -> str:
    """The RQ job: one attempt at the evaluation, safe to run any number of times. Returns what
    happened: 'deferred' (this host is short of disk space), 'skipped' (not queued, not due, or
    claimed elsewhere), 'done', 'dropped' (the attempt was given up meanwhile) or 'retrying'.

    Phases: check this host's free space (_refused_for_space) -> claim the attempt -> load the
    sources and options (load_inputs) -> score them (EVAL_FUNCTION) -> store the verdict, all under a
    heartbeat. A failure of our side after the claim (an exception, or the library's
    `infrastructure_error`: no space, I/O error, a sandbox that cannot start) releases the attempt:
    retried after a backoff, or failed with the host's reason; it never becomes a verdict."""
    close_old_connections()
    worker_name = current_worker_name()
    if _refused_for_space(evaluation_id, worker_name):
        return "deferred"
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
        reason = failure_reason(exc)
        # Across a database outage too (the failure may be that outage): until the sweep would see
        # the attempt's heartbeat go stale and release it anyway.
        with_db_retries(lambda: release(c, reason), budget_s=settings.EVAL_STALE_AFTER_S)
        if reason.startswith(HOST_FAULT) and counts_against_host(reason.removeprefix(HOST_FAULT).strip()):
            host_space.note_failure(evaluation_id, reason)  # N in a row: this host stops claiming
        return "retrying"
    if stored:
        host_space.note_verdict()
    return "done" if stored else "dropped"


HOST_FAULT = "infrastructure error:"  # how failure_reason starts for a failure of the host


class InfrastructureFailure(Exception):
    """The scoring library met a failure of the host (evaluation.sandbox.host_errors): no verdict."""


def failure_reason(exc: Exception) -> str:
    """What `failure_reason` says about a failure of our side: the host's reason when it is one."""
    if isinstance(exc, InfrastructureFailure):
        return f"{HOST_FAULT} {exc}"
    host = host_error(exc)  # e.g. the sandbox's folder could not be made on a full disk
    return f"{HOST_FAULT} {host}" if host else f"{type(exc).__name__}: {exc}"


def _refused_for_space(evaluation_id: int, worker_name: str) -> bool:
    """Below EVAL_MIN_FREE_MB on the scratch or build folder, or with a folder that fails a write,
    or sick (host_space.refusal), this host starts nothing: the evaluation waits (no attempt used)
    and the host says why where operators look. (The worker checks the same before it takes a job.)"""
    shortage = host_space.refusal()
    if not shortage:
        return False
    host_space.report()
    delay = max(1, settings.EVAL_RETRY_BACKOFF_S)
    if defer(evaluation_id, f"not started on {worker_name}: {shortage}; tried again in {delay} s", delay):
        log.warning("evaluation %s: not started on %s: %s", evaluation_id, worker_name, shortage)
    return True


def _evaluate_and_store(c: Claim, worker_stages: dict[str, float]) -> bool:
    t1 = time.monotonic()
    problem_source, kernel_source, config = load_inputs(c.evaluation_id)
    later = follow_up.defers_instruments(Evaluation.objects.get(pk=c.evaluation_id).hardware)
    if later:  # the verdict and its timing never wait for them (leaderboard/evaluations/follow_up.py)
        config = follow_up.without_instruments(config)
    worker_stages["db_load"] = time.monotonic() - t1
    t2 = time.monotonic()
    data = _scored(problem_source, kernel_source, config)
    worker_stages["evaluate"] = time.monotonic() - t2
    floor = config.instruments_min_speedup
    owe = partial(follow_up.owe_if_due, floor=floor) if later else None
    return with_db_retries(lambda: store_result(c, data, worker_stages, owe))


def _scored(problem_source: str, kernel_source: str, config: EvaluationConfig) -> dict[str, Any]:
    """The scoring library's reply as a dict; InfrastructureFailure for a failure of the host (retried
    like any failure of our side, never stored)."""
    result = evaluation_function()(problem_source, kernel_source, config)
    data = result.to_dict() if hasattr(result, "to_dict") else dict(result)
    if data.get("status") == INFRASTRUCTURE_ERROR:
        raise InfrastructureFailure(data.get("error") or "the host failed")
    return data


def run_instruments_job(evaluation_id: int, verdict_attempt: int) -> str:
    """The RQ job of the instruments run after a verdict (leaderboard/evaluations/follow_up.py): 'skipped'
    (no longer owed for that verdict, or its tries used up), 'dropped' (a later evaluation of the
    kernel came first), 'done', or 'retrying' (a failure of our side: the sweep enqueues it again).

    Phases: claim a try -> check nothing later came first -> the evaluation's config without timing,
    judging the stored figures (follow_up_config) -> score -> merge what the instruments found."""
    close_old_connections()
    if not follow_up.claim(evaluation_id, verdict_attempt):
        return "skipped"
    try:
        if with_db_retries(lambda: follow_up.drop_if_superseded(evaluation_id, verdict_attempt)):
            return "dropped"  # before any GPU time is spent on them
        problem_source, kernel_source, config = load_inputs(evaluation_id)
        data = _scored(problem_source, kernel_source, follow_up.follow_up_config(config, evaluation_id))
        merged = with_db_retries(lambda: follow_up.merge(evaluation_id, verdict_attempt, data))
    except Exception as exc:
        log.exception("instruments of evaluation %s failed on our side: %s", evaluation_id, failure_reason(exc))
        return "retrying"
    return "done" if merged else "dropped"


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
    device = "cuda" if ev.hardware.kind == ev.hardware.Kind.GPU else "cpu"
    options: dict[str, Any] = dict(
        device=device,
        timeout_s=float(settings.EVAL_TIMEOUT_S),
        atol=tolerance,
        rtol=tolerance,
        correctness_trials=rules.correctness_trials,
        precision=run.precision,  # the run's setting (KernelBench's precision option)
        # The site's private files (database, secret key, uploads) are not even visible to kernels.
        hide_paths=(str(settings.VAR_DIR),),
        # On a GPU host the timing core of this worker's GPU (EVAL_CPUS, else from the host's topology).
        cpus=timing_cpus(device),
    )
    # Passed on only when set, so that the library's own defaults apply otherwise.
    optional = {
        "correctness_trials": settings.EVAL_CORRECTNESS_TRIALS,
        "timing_trials": settings.EVAL_TIMING_TRIALS,
        "size_scale": settings.EVAL_SIZE_SCALE,
        "memory_limit_mb": settings.EVAL_MEMORY_LIMIT_MB,
        "build_entry_max_mb": settings.EVAL_BUILD_ENTRY_MAX_MB,
    }
    options.update({key: int(value) for key, value in optional.items() if value is not None})
    return problem.source, ev.kernel.source, EvaluationConfig(**options)


_load = load_inputs  # the name tests used before the builder needed it (leaderboard/evaluations/prebuild.py)
