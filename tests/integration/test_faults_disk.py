"""Fault suite, issue 20 case 1: a host that runs out of disk gives no verdict.

A full scratch disk once made the reference kernel itself end `runtime_error` (torch.save of its
outputs failing: "unexpected pos 704 vs 598") on its first attempt, with no retry, and the boards
changed. Now the scoring library tells the host's failures apart (status `infrastructure_error`), the
job retries them like any failure of our side and, after the last attempt, fails the evaluation with
the host's reason; and a worker whose scratch folder or build cache is below EVAL_MIN_FREE_MB starts
nothing at all, saying so in /healthz and `queue_status`.

The scratch folder is a small tmpfs (root mounts it; the tests skip, saying why, where it cannot).
"""

from __future__ import annotations

from collections.abc import Iterator
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command

from leaderboard.evaluations import queue as jobs
from leaderboard.models import Evaluation
from leaderboard.reads.runs import run_problems, run_progress, run_scores
from tests.tmpfs import fill, small_tmpfs

from .conftest import CORRECT_KERNEL, fake_source, submit, wait_for
from .fault_report import record


@pytest.fixture
def scratch() -> Iterator[Path]:
    try:
        with small_tmpfs(size_mb=32) as path:
            yield path
    except OSError as exc:
        pytest.skip(f"no small tmpfs for the scratch folder: {exc}")


def boards(run) -> list[dict]:
    return [score.as_dict() for score in run_scores(run, run_problems(run))]


def test_a_correct_kernel_on_a_full_scratch_disk_is_retried_and_ends_correct_once_space_returns(
    env, workers, make_kernels, cpu, scratch
):
    env.update(
        KB_WORK_DIR=str(scratch),
        EVAL_MIN_FREE_MB="0",
        EVAL_RETRY_BACKOFF_S="2",
        EVAL_CORRECTNESS_TRIALS="1",
        EVAL_TIMING_TRIALS="0",
    )
    filler = fill(scratch, leave_kb=12)  # room to start the sandbox, not to save the outputs
    (kernel,) = make_kernels([CORRECT_KERNEL])
    before = boards(kernel.run)
    (evaluation,) = submit([kernel], cpu)
    workers.start("--no-probe")

    def released():
        evaluation.refresh_from_db()
        return evaluation.attempts >= 1 and evaluation.state != Evaluation.State.RUNNING

    wait_for(released, timeout=120, message="the first attempt to end")
    assert (evaluation.state, evaluation.status) == ("queued", ""), evaluation.error
    assert "infrastructure error" in evaluation.failure_reason, evaluation.failure_reason
    assert "unexpected pos" in evaluation.failure_reason or "ENOSPC" in evaluation.failure_reason
    kernel.refresh_from_db()
    assert kernel.latest_evaluation_id is None and boards(kernel.run) == before  # no verdict reached a board
    assert run_progress(kernel.run).as_dict()["done"] is False

    filler.unlink()  # space returns
    wait_for(
        lambda: Evaluation.objects.get(pk=evaluation.pk).state == "done", timeout=120, message="the retry to finish"
    )
    first_reason = evaluation.failure_reason
    evaluation.refresh_from_db()
    assert (evaluation.status, evaluation.attempts) == ("correct", 2), evaluation.error
    assert boards(kernel.run)[0]["correct_rate"] == 1.0
    record(
        "1. full scratch disk, real scoring",
        first_attempt=first_reason,
        boards_unchanged=True,
        final=f"{evaluation.state} {evaluation.status} after {evaluation.attempts} attempts",
    )
    assert run_progress(kernel.run).as_dict()["done"] is True


def test_an_infrastructure_error_is_retried_then_fails_with_the_hosts_reason(env, workers, make_kernels, cpu):
    (kernel,) = make_kernels([fake_source("full", "status=infrastructure_error")])
    (evaluation,) = submit([kernel], cpu)

    workers.run_burst(fake=True)

    evaluation.refresh_from_db()
    assert (evaluation.state, evaluation.status, evaluation.attempts) == ("failed", "", 3)
    assert evaluation.failure_reason.startswith("gave up after 3 attempts; last: attempt 3 on ")
    assert "infrastructure error: fake: No space left on device" in evaluation.failure_reason
    kernel.refresh_from_db()
    assert kernel.latest_evaluation_id is None
    record("1. host error on every attempt", final=f"{evaluation.state}: {evaluation.failure_reason}")


def test_a_worker_below_the_free_space_floor_starts_nothing_and_says_so(
    env, workers, make_kernels, cpu, scratch, client, settings
):
    env.update(KB_WORK_DIR=str(scratch), EVAL_MIN_FREE_MB="16")
    filler = fill(scratch, leave_kb=4 * 1024)
    (kernel,) = make_kernels([fake_source("floor")])
    (evaluation,) = submit([kernel], cpu)
    workers.start(fake=True)

    def refused():
        return client.get("/healthz").json()["evaluation_hosts"].get("low_disk")

    wait_for(refused, timeout=90, message="the worker to refuse work")
    evaluation.refresh_from_db()
    # Left in the queue for a host with room: not taken, not deferred, no attempt used.
    assert (evaluation.state, evaluation.attempts, evaluation.failure_reason) == ("queued", 0, "")
    assert evaluation.job_id in jobs.eval_queue(cpu.queue_name).get_job_ids()
    health = client.get("/healthz").json()
    assert health["status"] == "degraded" and health["evaluation_hosts"]["ok"] is False
    refusal = health["evaluation_hosts"]["low_disk"][0]["reason"]
    assert f"only 4 MB free in the scratch folder {scratch} (floor 16 MB)" in refusal
    shown = StringIO()
    call_command("queue_status", stdout=shown)
    assert "STARTS NOTHING: only 4 MB free in the scratch folder" in shown.getvalue()

    filler.unlink()
    wait_for(
        lambda: Evaluation.objects.get(pk=evaluation.pk).state == "done",
        timeout=60,
        message="the evaluation to run once there is room",
    )
    evaluation.refresh_from_db()
    assert (evaluation.status, evaluation.attempts) == ("correct", 1)
    wait_for(lambda: client.get("/healthz").json()["status"] == "ok", timeout=30, message="/healthz to clear")
    record(
        "1. below the free-space floor",
        refused=refusal,
        healthz=health["status"],
        final=f"{evaluation.state} {evaluation.status} after {evaluation.attempts} attempt(s)",
    )
