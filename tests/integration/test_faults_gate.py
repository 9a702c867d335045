"""A host that cannot run a job does not take it, and says why once.

1. A host below its disk floor (EVAL_MIN_FREE_MB) once took jobs off the queue only to defer them
   (13 in 0.6 s, each back 30 s later) while another host had room. Now its worker takes nothing:
   the jobs stay in Redis, no row says "not started", and a host with room runs them.
2. A refusing worker once logged and reported its health every 2 s, because its reason named the
   write probe's random file; the reason now names the folder only, and a steady refusal is logged
   once (its figures, MB free, may move meanwhile).
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from leaderboard.evaluations import host_space
from leaderboard.evaluations import queue as jobs
from leaderboard.evaluations.rq_worker import GATE_POLL_S
from leaderboard.models import Evaluation
from tests.tmpfs import small_tmpfs

from .conftest import fake_source, submit, wait_for
from .fault_report import record

pytestmark = pytest.mark.timeout(300)


def test_a_host_below_its_floor_leaves_the_jobs_to_a_host_with_room(env, workers, make_kernels, cpu):
    evaluations = submit(make_kernels([fake_source(f"floor{i}") for i in range(3)]), cpu)
    env.update(EVAL_MIN_FREE_MB=str(10**9), EVAL_HOST_NAME="full-host")  # no disk has a petabyte free
    full = workers.start(fake=True)
    wait_for(lambda: "takes no job" in workers.output(full), timeout=120, message="the full host to refuse")
    time.sleep(4 * GATE_POLL_S)  # a few polls of its gate

    queued = set(jobs.eval_queue(cpu.queue_name).get_job_ids())
    rows = list(
        Evaluation.objects.filter(pk__in=[e.pk for e in evaluations]).values_list(
            "job_id", "attempts", "failure_reason"
        )
    )
    assert {job_id for job_id, _, _ in rows} <= queued, "the full host took jobs off the queue"
    assert [(attempts, reason) for _, attempts, reason in rows] == [(0, "")] * 3
    refusals = workers.output(full).count("takes no job")
    assert refusals == 1, workers.output(full)

    env.update(EVAL_MIN_FREE_MB="0", EVAL_HOST_NAME="roomy-host")
    workers.run_burst(fake=True)
    done = Evaluation.objects.filter(pk__in=[e.pk for e in evaluations])
    assert sorted(done.values_list("state", "status", "attempts")) == [("done", "correct", 1)] * 3
    record("5. a host below its disk floor", jobs_left_in_queue=len(rows), refusals_logged=refusals,
           final="3 done correct on the host with room, 1 attempt each")  # fmt: skip


@pytest.fixture
def read_only_folder() -> Iterator[Path]:
    try:
        with small_tmpfs(size_mb=8) as path:
            done = subprocess.run(["mount", "-o", "remount,ro", str(path)], capture_output=True, text=True)
            if done.returncode != 0:
                pytest.skip(f"cannot remount a tmpfs read-only: {done.stderr.strip()}")
            yield path
    except OSError as exc:
        pytest.skip(f"no small tmpfs to make read-only: {exc}")


def test_a_read_only_scratch_reads_the_same_at_every_probe(read_only_folder, monkeypatch, settings):
    monkeypatch.setenv("KB_WORK_DIR", str(read_only_folder))
    settings.EVAL_MIN_FREE_MB = 0
    first, second = host_space.probe_failure(), host_space.probe_failure()
    assert "EROFS" in first and str(read_only_folder) in first
    assert first == second and ".kb-space-probe-" not in first
    assert host_space.steady("only 4 MB free in x (floor 16 MB)") == host_space.steady(
        "only 3 MB free in x (floor 16 MB)"
    )
    record("7. a refusing worker's reason", reason=first)
