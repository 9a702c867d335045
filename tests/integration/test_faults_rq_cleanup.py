"""RQ's registry cleanup cannot fail another host's live job.

RQ's maintenance (a worker every 10 minutes) moves to the failed registry every started job whose
registry score (its own host's clock plus 90 s, renewed by that host's heartbeats) is behind the
cleaning host's clock. A job running on a host 10 minutes behind was moved to `failed` by a
cleaner with the right time while it ran (its verdict was stored; RQ's bookkeeping and dashboard
were wrong). Now the cleaner first asks the database, whose heartbeats are on one clock: a job
whose attempt is beating stays started; a dead one is failed as before. Real Redis, real RQ.
"""

from __future__ import annotations

from datetime import timedelta

import rq.registry
from rq.executions import Execution
from rq.job import Job, JobStatus
from rq.registry import FailedJobRegistry, StartedJobRegistry

from leaderboard.evaluations import queue as jobs
from leaderboard.evaluations.attempts import claim
from leaderboard.evaluations.clock import db_now
from leaderboard.evaluations.rq_worker import EvalWorker
from leaderboard.models import Evaluation

from .conftest import fake_source, submit
from .fault_report import record

SKEW_S = 600


def start_on_a_host_behind(job_id: str, queue, monkeypatch) -> None:
    """Mark the job started as RQ's worker on a host SKEW_S behind would: its registry score from
    that host's clock."""
    job = Job.fetch(job_id, connection=queue.connection)
    queue.remove(job)
    behind = rq.registry.current_timestamp() - SKEW_S
    with monkeypatch.context() as skewed, queue.connection.pipeline() as pipe:
        skewed.setattr(rq.registry, "current_timestamp", lambda: behind)
        Execution.create(job, ttl=90, pipeline=pipe, worker_name="behind.1")
        job.set_status(JobStatus.STARTED, pipeline=pipe)
        pipe.execute()


def test_a_cleaner_fails_only_the_jobs_whose_attempts_the_database_says_are_dead(env, make_kernels, cpu, monkeypatch):
    live, dead = submit(make_kernels([fake_source("rq-live"), fake_source("rq-dead")]), cpu)
    queue = jobs.eval_queue(cpu.queue_name)
    for evaluation in (live, dead):
        start_on_a_host_behind(evaluation.job_id, queue, monkeypatch)
        assert claim(evaluation.pk, "behind.1", evaluation.job_id) is not None
    Evaluation.objects.filter(pk=live.pk).update(heartbeat_at=db_now())
    Evaluation.objects.filter(pk=dead.pk).update(heartbeat_at=db_now() - timedelta(seconds=120))
    started = StartedJobRegistry(queue.name, connection=queue.connection)
    assert set(started.get_expired_job_ids()) == {live.job_id, dead.job_id}  # RQ takes both for abandoned

    cleaner = EvalWorker([queue], connection=jobs.worker_redis_connection(), name="cleaner.1")
    cleaner.clean_registries()

    failed = set(FailedJobRegistry(queue.name, connection=queue.connection).get_job_ids())
    assert live.job_id not in failed and dead.job_id in failed
    assert Job.fetch(live.job_id, connection=queue.connection).get_status() == JobStatus.STARTED
    assert live.job_id in started.get_job_ids(cleanup=False)
    record("4. RQ's cleanup on a job of a host 600 s behind", live_job=JobStatus.STARTED.value,
           dead_job="failed")  # fmt: skip
