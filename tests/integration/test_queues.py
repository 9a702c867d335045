"""The queue configuration with a real Redis and real workers: the job's old dotted path, a hardware
whose queue is not listed in EVAL_QUEUES, and how the sweep reads RQ's job states."""

from __future__ import annotations

from datetime import timedelta

from rq.job import Job, JobStatus
from rq.utils import now

from leaderboard.evaluations import queue as jobs
from leaderboard.evaluations.sweep import sweep_evaluations
from leaderboard.models import Evaluation, Run
from problems.models import Hardware

from .conftest import fake_calls, fake_source, submit

OLD_JOB_FUNCTION = "leaderboard.jobs.run_evaluation_job"


def test_a_job_queued_under_the_old_dotted_path_still_runs(env, workers, make_kernels, cpu):
    (kernel,) = make_kernels([fake_source("old-path")])
    (evaluation,) = submit([kernel], cpu)
    jobs.redis_connection().flushall()  # replace the job by one a previous release enqueued
    queue = jobs.eval_queue("eval-cpu")
    queue.enqueue(OLD_JOB_FUNCTION, args=(evaluation.pk,), job_id=evaluation.job_id)
    assert Job.fetch(evaluation.job_id, connection=jobs.redis_connection()).func_name == OLD_JOB_FUNCTION

    workers.run_burst(fake=True)

    evaluation.refresh_from_db()
    assert (evaluation.state, evaluation.status, evaluation.attempts) == ("done", "correct", 1)
    assert fake_calls(env) == [("start", "old-path"), ("end", "old-path")]
    assert Job.fetch(evaluation.job_id, connection=jobs.redis_connection()).return_value() == "done"


def test_a_hardware_missing_from_eval_queues_still_gets_its_queue_and_worker(env, workers, make_kernels, settings):
    assert "eval-a100" not in settings.EVAL_QUEUES
    a100 = Hardware.objects.create(slug="a100", name="A100", kind=Hardware.Kind.CPU)
    (kernel,) = make_kernels([fake_source("a100")])
    Run.objects.filter(pk=kernel.run_id).update(hardware=a100)  # a run's kernels are evaluated on its hardware
    (evaluation,) = submit([kernel], a100)
    assert jobs.eval_queue(a100.queue_name).job_ids == [evaluation.job_id]

    output = workers.run_burst("--queue", "eval-a100", fake=True)

    assert "eval-a100 not in EVAL_QUEUES" in output
    evaluation.refresh_from_db()
    assert (evaluation.state, evaluation.worker_name != "") == ("done", True)


def test_the_sweep_reenqueues_a_job_rq_started_long_ago_that_never_claimed(env, make_kernels, cpu):
    (kernel,) = make_kernels([fake_source("stuck")])
    (evaluation,) = submit([kernel], cpu)
    job = Job.fetch(evaluation.job_id, connection=jobs.redis_connection())
    job.set_status(JobStatus.STARTED)
    job.started_at = now() - timedelta(seconds=600)  # its work horse died before the claim
    job.save()

    assert sweep_evaluations().reenqueued == 1
    job = Job.fetch(evaluation.job_id, connection=jobs.redis_connection())
    assert job.get_status() == JobStatus.QUEUED
    assert Evaluation.objects.get(pk=evaluation.pk).state == "queued"


def test_the_sweep_leaves_a_job_rq_started_recently_alone(env, make_kernels, cpu):
    (kernel,) = make_kernels([fake_source("busy")])
    (evaluation,) = submit([kernel], cpu)
    job = Job.fetch(evaluation.job_id, connection=jobs.redis_connection())
    job.set_status(JobStatus.STARTED)
    job.started_at = now()
    job.save()

    assert sweep_evaluations().reenqueued == 0


def test_evalworker_with_two_workers_drains_the_queue_through_both(env, workers, make_kernels, cpu):
    kernels = make_kernels([fake_source(f"pool-{i}", "sleep=1") for i in range(6)])
    evaluations = submit(kernels, cpu)

    out = workers.run_burst("--workers", "2", "--name", "pool", fake=True)

    assert "starting 2 workers" in out
    names = set()
    for evaluation in evaluations:
        evaluation.refresh_from_db()
        assert (evaluation.state, evaluation.attempts) == ("done", 1)
        names.add(evaluation.worker_name)
    assert names == {"pool.w0", "pool.w1"}  # each took some: six one-second jobs, two at a time
