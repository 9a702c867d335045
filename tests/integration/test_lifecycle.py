"""The lifecycle rules, in process (no worker): claims, stale attempts, backoff, the sweep, and
what the pages show. Redis is real; the database is the shared test database."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from leaderboard.evaluations import queue as jobs
from leaderboard.evaluations.attempts import claim, release, store_result
from leaderboard.evaluations.progress import progress, progress_many, queue_position
from leaderboard.evaluations.sweep import next_due_in, sweep_evaluations
from leaderboard.models import Evaluation

from .conftest import fake_source, submit

VERDICT = {"status": "correct", "compiled": True, "correct": True, "speedup": 2.0, "speedup_interval": [1.9, 2.1]}


def test_queued_evaluations_show_their_place_in_line(env, make_kernels, cpu):
    evaluations = submit(make_kernels([fake_source(f"q{i}") for i in range(3)]), cpu)
    assert [queue_position(e) for e in evaluations] == [1, 2, 3]
    assert progress(evaluations[1]).label == "queued, 2nd in line on eval-cpu"
    assert {pk: p.position for pk, p in progress_many(evaluations).items()} == {
        evaluations[0].pk: 1,
        evaluations[1].pk: 2,
        evaluations[2].pk: 3,
    }
    claim(evaluations[0].pk, "host.1")
    evaluations[1].refresh_from_db()
    assert queue_position(evaluations[1]) == 1


def test_a_running_evaluation_shows_since_when_and_where(env, make_kernels, cpu):
    (evaluation,) = submit(make_kernels([fake_source("r")]), cpu)
    claim(evaluation.pk, "gpu-host-3.4242")
    evaluation.refresh_from_db()
    shown = progress(evaluation)
    assert shown.state == "running" and shown.worker == "gpu-host-3.4242" and shown.started_at
    assert shown.label.startswith("running since ") and shown.label.endswith(" on gpu-host-3.4242")
    assert shown.as_dict()["started_at"] == evaluation.started_at.isoformat()


def test_an_attempt_is_claimed_once(env, make_kernels, cpu):
    (evaluation,) = submit(make_kernels([fake_source("c")]), cpu)
    assert claim(evaluation.pk, "a.1") is not None
    assert claim(evaluation.pk, "b.2") is None


def test_a_result_from_an_attempt_given_up_on_is_dropped(env, make_kernels, cpu):
    (evaluation,) = submit(make_kernels([fake_source("s")]), cpu)
    first = claim(evaluation.pk, "slow.1")
    assert release(first, "worker stopped responding") == "queued"
    second = claim(evaluation.pk, "fast.2")

    assert store_result(first, VERDICT) is False  # the late first attempt writes nothing
    evaluation.refresh_from_db()
    assert (evaluation.state, evaluation.status, evaluation.attempts) == ("running", "", 2)
    assert store_result(second, VERDICT) is True
    evaluation.refresh_from_db()
    assert (evaluation.state, evaluation.status, evaluation.speedup) == ("done", "correct", 2.0)
    assert evaluation.kernel.latest_evaluation_id == evaluation.pk


def test_retries_wait_in_the_database_until_due_and_keep_the_reason(env, make_kernels, cpu, settings):
    settings.EVAL_RETRY_BACKOFF_S = 30
    (evaluation,) = submit(make_kernels([fake_source("b")]), cpu)
    jobs.redis_connection().flushall()
    attempt = claim(evaluation.pk, "w.1")
    release(attempt, "OperationalError: database is locked")

    evaluation.refresh_from_db()
    assert evaluation.state == "queued" and evaluation.job_id == f"evaluation-{evaluation.pk}-2"
    assert "database is locked; retry in 30 s" in evaluation.failure_reason
    assert 29 <= (evaluation.not_before - timezone.now()).total_seconds() <= 30
    assert ", retry 2 at " in progress(evaluation).label
    assert jobs.eval_queue("eval-cpu").scheduled_job_registry.get_job_ids() == []  # not RQ's scheduler
    assert claim(evaluation.pk, "early.1") is None  # a copy of the job delivered early claims nothing
    assert sweep_evaluations().reenqueued == 0  # not due yet
    assert next_due_in(timezone.now()) == pytest.approx(30, abs=1.5)

    due = evaluation.not_before + timedelta(seconds=0.1)
    assert sweep_evaluations(now=due).reenqueued == 1
    assert jobs.eval_queue("eval-cpu").job_ids == [evaluation.job_id]


def test_the_sweep_releases_silent_attempts_and_fails_them_after_the_limit(env, make_kernels, cpu):
    (evaluation,) = submit(make_kernels([fake_source("d")]), cpu)
    for attempt in (1, 2, 3):
        assert claim(evaluation.pk, f"dead.{attempt}") is not None
        later = timezone.now() + timedelta(seconds=60)  # heartbeats stopped a minute ago
        assert sweep_evaluations(now=later).abandoned == 1
    evaluation.refresh_from_db()
    assert (evaluation.state, evaluation.attempts) == ("failed", 3)
    assert evaluation.failure_reason.startswith("gave up after 3 attempts")
    assert progress(evaluation).label.startswith("failed: gave up after 3 attempts")


def test_the_sweep_leaves_live_attempts_alone(env, make_kernels, cpu):
    (evaluation,) = submit(make_kernels([fake_source("l")]), cpu)
    claim(evaluation.pk, "alive.1")
    assert sweep_evaluations().abandoned == 0
    evaluation.refresh_from_db()
    assert evaluation.state == "running"


def test_a_submission_made_while_redis_is_down_is_kept_and_enqueued_later(env, make_kernels, cpu, settings):
    settings.REDIS_URL = "redis://127.0.0.1:1/0"  # nothing listens there
    jobs._redis.cache_clear()
    (evaluation,) = submit(make_kernels([fake_source("down")]), cpu)
    assert Evaluation.objects.get(pk=evaluation.pk).state == "queued"
    assert sweep_evaluations().redis_ok is False

    settings.REDIS_URL = env["REDIS_URL"]
    jobs._redis.cache_clear()
    assert sweep_evaluations().reenqueued == 1
    assert jobs.eval_queue("eval-cpu").job_ids == [evaluation.job_id]


def test_a_job_whose_horse_died_before_claiming_is_enqueued_again(env, make_kernels, cpu):
    (evaluation,) = submit(make_kernels([fake_source("h")]), cpu)
    conn = jobs.redis_connection()
    conn.delete("rq:queue:eval-cpu")  # dequeued by a worker ...
    long_ago = (timezone.now() - timedelta(minutes=5)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    conn.hset(f"rq:job:{evaluation.job_id}", mapping={"status": "started", "started_at": long_ago})
    # ... whose horse died before its claim: the row is still queued, the job 'started' for minutes.
    assert sweep_evaluations().reenqueued == 1
    assert jobs.eval_queue("eval-cpu").job_ids == [evaluation.job_id]


def test_the_kernel_keeps_the_newest_verdict_of_its_runs_hardware(env, make_kernels, cpu):
    from problems.models import Hardware

    h200 = Hardware.objects.create(slug="h200", name="H200")
    (kernel,) = make_kernels([fake_source("k")])  # its run is on the CPU
    # Asking for an evaluation on other hardware than the run's is refused now (issue 19, case 6);
    # data stored before that rule may still hold one, made here directly.
    (on_cpu,) = submit([kernel], cpu)
    on_h200 = Evaluation.objects.create(kernel=kernel, hardware=h200, state=Evaluation.State.QUEUED)
    for evaluation in (on_cpu, on_h200):
        store_result(claim(evaluation.pk, "w.1"), VERDICT)
    kernel.refresh_from_db()
    assert kernel.latest_evaluation_id == on_cpu.pk
    assert kernel.evaluations.count() == 2
