"""Workers that never lose a submission: killed workers, lost Redis, concurrent workers, a burst of
200. These use the fake evaluation (tests/integration/fake_evaluation.py, injected with
EVAL_FUNCTION) because they test the queueing, not the scoring: a real evaluation costs seconds of
CPU per kernel, which would make these tests take many minutes and their timings noisy."""

from __future__ import annotations

import os
import signal
import time
from collections import Counter

from leaderboard.evaluations import queue as jobs
from leaderboard.evaluations.sweep import dead_worker_bound_s, sweep_evaluations
from leaderboard.models import Evaluation

from .conftest import fake_calls, fake_source, submit, wait_for


def horse_pid(env, marker: str) -> int:
    """The pid of the process running the fake evaluation of `marker` (the RQ work horse)."""

    def started():
        path = env["KB_FAKE_EVAL_LOG"]
        if not os.path.exists(path):
            return None
        for line in open(path):
            event, mark, pid = line.split()
            if (event, mark) == ("start", marker):
                return int(pid)
        return None

    return wait_for(started, timeout=90, message=f"the evaluation of {marker} to start")


def states(evaluations) -> Counter:
    return Counter(Evaluation.objects.filter(pk__in=[e.pk for e in evaluations]).values_list("state", flat=True))


def test_it_retries_the_job_of_a_worker_killed_mid_job_within_the_bound(env, workers, make_kernels, cpu):
    (kernel,) = make_kernels([fake_source("k1", "sleep_first=120")])
    (evaluation,) = submit([kernel], cpu)
    doomed = workers.start(fake=True)
    horse = horse_pid(env, "k1")
    survivor = workers.start(fake=True)  # its sweeper child watches for dead workers
    wait_for(lambda: "Listening on" in workers.output(survivor), timeout=90, message="the second worker")

    # The host of the first worker dies: worker, work horse and all, without a chance to clean up.
    os.kill(horse, signal.SIGKILL)
    os.killpg(doomed.pid, signal.SIGKILL)
    killed_at = time.monotonic()

    def released():
        evaluation.refresh_from_db()
        return evaluation.state != Evaluation.State.RUNNING or evaluation.attempts > 1

    wait_for(released, timeout=dead_worker_bound_s() + 30, message="the sweep to notice the dead worker")
    noticed_after = time.monotonic() - killed_at
    assert noticed_after < dead_worker_bound_s() + 10, noticed_after
    wait_for(lambda: states([evaluation])["done"] == 1, timeout=60, message="the retry to finish")

    evaluation.refresh_from_db()
    assert evaluation.status == "correct" and evaluation.attempts == 2
    assert "stopped responding" in evaluation.failure_reason
    assert kernel.evaluations.count() == 1
    assert Counter(fake_calls(env)) == {("start", "k1"): 2, ("end", "k1"): 1}

    # SIGTERM stops the surviving worker cleanly.
    survivor.send_signal(signal.SIGTERM)
    assert survivor.wait(timeout=30) == 0


def test_it_retries_at_once_when_only_the_work_horse_dies(env, workers, make_kernels, cpu):
    (kernel,) = make_kernels([fake_source("k1", "sleep_first=120")])
    (evaluation,) = submit([kernel], cpu)
    worker = workers.start("--burst", fake=True)
    os.kill(horse_pid(env, "k1"), signal.SIGKILL)  # e.g. the out-of-memory killer

    assert workers.exit_code(worker, 90) == 0, workers.output(worker)
    evaluation.refresh_from_db()
    assert (evaluation.state, evaluation.status, evaluation.attempts) == ("done", "correct", 2)
    assert "work horse ended abnormally" in evaluation.failure_reason
    assert Counter(fake_calls(env)) == {("start", "k1"): 2, ("end", "k1"): 1}


def test_it_fails_an_evaluation_after_repeated_infrastructure_failures(env, workers, make_kernels, cpu):
    broken, fine = make_kernels([fake_source("broken", "raise"), fake_source("fine", "status=compile_error")])
    bad, compile_error = submit([broken, fine], cpu)

    workers.run_burst(fake=True)

    bad.refresh_from_db()
    assert (bad.state, bad.status, bad.attempts) == ("failed", "", 3)
    assert "gave up after 3 attempts" in bad.failure_reason and "RuntimeError" in bad.failure_reason
    broken.refresh_from_db()
    assert broken.latest_evaluation is None
    # A kernel that does not compile is a verdict, not an infrastructure failure: one attempt.
    compile_error.refresh_from_db()
    assert (compile_error.state, compile_error.status, compile_error.attempts) == ("done", "compile_error", 1)


def test_jobs_that_waited_while_redis_restarted_still_run(env, workers, make_kernels, cpu, redis_server):
    kernels = make_kernels([fake_source(f"r{i}") for i in range(5)])
    evaluations = submit(kernels, cpu)
    assert jobs.eval_queue("eval-cpu").count == 5

    redis_server.restart()  # no persistence: every queued job is gone
    jobs._redis.cache_clear()
    assert jobs.eval_queue("eval-cpu").count == 0

    report = sweep_evaluations()
    assert report.reenqueued == 5
    assert sweep_evaluations().reenqueued == 0  # idempotent: Redis holds them now
    workers.run_burst(fake=True)

    assert states(evaluations) == {"done": 5}
    assert Counter(event for event, _ in fake_calls(env)) == {"start": 5, "end": 5}


def test_jobs_that_waited_while_redis_was_flushed_still_run(env, workers, make_kernels, cpu):
    kernels = make_kernels([fake_source(f"f{i}") for i in range(5)])
    evaluations = submit(kernels, cpu)
    jobs.redis_connection().flushall()

    assert sweep_evaluations().reenqueued == 5
    workers.run_burst(fake=True)

    assert states(evaluations) == {"done": 5}


def test_two_workers_on_one_queue_run_each_job_exactly_once(env, workers, make_kernels, cpu):
    n = 30
    kernels = make_kernels([fake_source(f"x{i}", "sleep=0.3") for i in range(n)])
    evaluations = submit(kernels, cpu)
    for evaluation in evaluations:  # every job delivered twice, as after a sweep raced a slow worker
        jobs.enqueue_evaluation(evaluation.pk)
    a = workers.start("--burst", fake=True)
    b = workers.start("--burst", fake=True)
    assert a.wait(timeout=180) == 0 and b.wait(timeout=180) == 0

    assert states(evaluations) == {"done": n}
    assert set(Evaluation.objects.values_list("attempts", flat=True)) == {1}
    starts = Counter(marker for event, marker in fake_calls(env) if event == "start")
    assert starts == {f"x{i}": 1 for i in range(n)}
    assert Evaluation.objects.values("worker_name").distinct().count() == 2  # both took part


def test_two_hundred_submissions_at_once_drain_with_nothing_lost(env, workers, make_kernels, cpu):
    kernels = make_kernels([fake_source(f"m{i}") for i in range(200)])
    evaluations = submit(kernels, cpu)
    assert jobs.eval_queue("eval-cpu").count == 200

    a = workers.start("--burst", fake=True)
    b = workers.start("--burst", fake=True)
    assert a.wait(timeout=240) == 0 and b.wait(timeout=240) == 0

    assert states(evaluations) == {"done": 200}
    assert set(Evaluation.objects.values_list("attempts", flat=True)) == {1}
    assert Counter(event for event, _ in fake_calls(env)) == {"start": 200, "end": 200}
    assert jobs.eval_queue("eval-cpu").count == 0
    assert sweep_evaluations().reenqueued == 0


def test_sigterm_lets_the_running_evaluation_finish_then_stops(env, workers, make_kernels, cpu):
    (kernel,) = make_kernels([fake_source("t", "sleep=4")])
    (evaluation,) = submit([kernel], cpu)
    worker = workers.start(fake=True)
    horse_pid(env, "t")  # the evaluation is under way

    worker.send_signal(signal.SIGTERM)
    assert workers.exit_code(worker, 60) == 0, workers.output(worker)

    evaluation.refresh_from_db()
    assert (evaluation.state, evaluation.status, evaluation.attempts) == ("done", "correct", 1)
    assert "warm shut down requested" in workers.output(worker)
