"""Issue 32 case 4: a broken host must not burn everyone's attempts.

1. Scratch on a read-only file system (a small tmpfs remounted `ro`: EROFS) has room to spare, and
   once failed every job in 0.1 s ("could not set up the sandbox: EROFS"). The worker's write probe
   now finds it before it takes a job: it claims nothing (no attempt used), `/healthz` says
   `degraded` naming the host under `not_claiming`, `queue_status` says "STARTS NOTHING", and the
   evaluation (scored for real) runs once the folder is writable again.
2. A host that fails where the probe cannot see (the fake scoring answers its EROFS on the host
   named `broken`, by EVAL_HOST_NAME): after EVAL_HOST_FAILURE_LIMIT evaluations in a row end in
   its infrastructure errors it stops claiming, says so, and gives back the attempts it burned;
   the rows it drove to `failed` are retried once a healthy host (`healthy`) sweeps, and every
   evaluation ends `correct`.
3. A killed build (a kernel can fake one: its own code runs in the build process) is retried but
   never counts toward that limit, so hostile kernels cannot make a host stop claiming.

Before the fix the first worker claimed the evaluation on the read-only scratch and burned all its
attempts (`failed`), and the broken host of part 2 failed every evaluation.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command

from leaderboard.evaluations import host_space
from leaderboard.evaluations.jobs import run_evaluation_job
from leaderboard.models import Evaluation
from tests.tmpfs import small_tmpfs

from .conftest import CORRECT_KERNEL, fake_source, submit, wait_for
from .fault_report import record

pytestmark = pytest.mark.timeout(300)


@pytest.fixture
def read_only_scratch() -> Iterator[Path]:
    try:
        with small_tmpfs(size_mb=64) as path:
            done = subprocess.run(["mount", "-o", "remount,ro", str(path)], capture_output=True, text=True)
            if done.returncode != 0:
                pytest.skip(f"cannot remount a tmpfs read-only: {done.stderr.strip()}")
            yield path
    except OSError as exc:
        pytest.skip(f"no small tmpfs for the scratch folder: {exc}")


def test_a_read_only_scratch_folder_stops_the_host_claiming(env, workers, make_kernels, cpu, read_only_scratch, client):
    env.update(
        KB_WORK_DIR=str(read_only_scratch),
        EVAL_MIN_FREE_MB="0",
        EVAL_CORRECTNESS_TRIALS="1",
        EVAL_TIMING_TRIALS="0",
        EVAL_HOST_NAME="ro-host",
    )
    (kernel,) = make_kernels([CORRECT_KERNEL])
    (evaluation,) = submit([kernel], cpu)
    workers.start("--no-probe")

    def says_so() -> bool:
        hosts = client.get("/healthz").json()["evaluation_hosts"]
        return any(h["host"] == "ro-host" for h in hosts.get("not_claiming", []))

    wait_for(says_so, timeout=120, message="/healthz to name the read-only host")
    health = client.get("/healthz").json()
    reason = next(h["reason"] for h in health["evaluation_hosts"]["not_claiming"] if h["host"] == "ro-host")
    assert health["status"] == "degraded" and "EROFS" in reason and str(read_only_scratch) in reason
    shown = StringIO()
    call_command("queue_status", stdout=shown)
    assert "STARTS NOTHING: the scratch folder" in shown.getvalue()
    evaluation.refresh_from_db()
    assert (evaluation.state, evaluation.attempts) == ("queued", 0)  # nothing burned

    subprocess.run(["mount", "-o", "remount,rw", str(read_only_scratch)], check=True)
    wait_for(
        lambda: Evaluation.objects.get(pk=evaluation.pk).state == "done",
        timeout=150,
        message="the evaluation to run once the scratch folder is writable",
    )
    evaluation.refresh_from_db()
    assert (evaluation.status, evaluation.attempts) == ("correct", 1), evaluation.failure_reason
    record(
        "4. scratch read-only (EROFS)",
        refused=reason[:140],
        healthz=health["status"],
        attempts_used_meanwhile=0,
        final=f"{evaluation.state} {evaluation.status} after {evaluation.attempts} attempt(s)",
    )


def test_a_host_failing_evaluations_in_a_row_stops_gives_back_and_a_healthy_host_finishes(
    env, workers, make_kernels, cpu, client
):
    env.update(EVAL_HOST_FAILURE_LIMIT="3", EVAL_HOST_SICK_S="600", EVAL_MIN_FREE_MB="0")
    kernels = make_kernels([fake_source(f"h{i}", "broken_host=broken") for i in range(5)])
    evaluations = submit(kernels, cpu)
    env["EVAL_HOST_NAME"] = "broken"
    broken = workers.start(fake=True)

    def sick() -> bool:
        hosts = client.get("/healthz").json()["evaluation_hosts"]
        return any(h["host"] == "broken" for h in hosts.get("not_claiming", []))

    wait_for(sick, timeout=90, message="the broken host to stop claiming")
    health = client.get("/healthz").json()
    reason = next(h["reason"] for h in health["evaluation_hosts"]["not_claiming"] if h["host"] == "broken")
    assert "3 evaluations in a row ended in this host's infrastructure errors" in reason
    rows = {e.pk: e for e in Evaluation.objects.filter(pk__in=[e.pk for e in evaluations])}
    burned = sum(r.attempts for r in rows.values())
    returned = sum(r.attempts_returned for r in rows.values())
    failed_meanwhile = sum(r.state == "failed" for r in rows.values())
    assert burned >= 3 and returned == burned, [(r.pk, r.state, r.attempts, r.attempts_returned) for r in rows.values()]
    assert all(r.state != "done" for r in rows.values())
    shown = StringIO()
    call_command("queue_status", stdout=shown)
    assert "STARTS NOTHING: 3 evaluations in a row" in shown.getvalue()

    before = sorted(Evaluation.objects.filter(pk__in=rows).values_list("state", "attempts"))
    env["EVAL_HOST_NAME"] = "healthy"
    workers.start(fake=True)
    wait_for(
        lambda: Evaluation.objects.filter(pk__in=rows, state="done").count() == len(rows),
        timeout=120,
        message="a healthy host to finish every evaluation",
    )
    finished = list(Evaluation.objects.filter(pk__in=rows))
    assert {(e.state, e.status) for e in finished} == {("done", "correct")}
    assert broken.poll() is None  # it waits, registered, taking nothing
    record(
        "4. host failing evaluations in a row",
        evaluations=len(rows),
        attempts_burned=burned,
        attempts_given_back=returned,
        failed_before_a_healthy_host=failed_meanwhile,
        attempts_before=before,
        final=f"{len(finished)} done correct on the healthy host",
    )


def killed_build(problem_source: str, kernel_source: str, config: object = None) -> dict[str, str]:
    """What the library answers for a kernel whose build process os._exit()s at import."""
    error = (
        "the build was killed: the build process exited unexpectedly with status 3 (no verdict: built again next time)"
    )
    return {"status": "infrastructure_error", "error": error}


def test_killed_builds_do_not_make_the_host_sick(env, make_kernels, cpu, settings):
    settings.EVAL_FUNCTION = f"{__name__}.killed_build"
    settings.EVAL_HOST_FAILURE_LIMIT = 1
    settings.EVAL_MIN_FREE_MB = 0
    (evaluation,) = submit(make_kernels([fake_source("killed")]), cpu)
    assert run_evaluation_job(evaluation.pk) == "retrying"
    evaluation.refresh_from_db()
    assert evaluation.attempts == 1 and "the build was killed" in evaluation.failure_reason
    assert host_space.sick() == ""
