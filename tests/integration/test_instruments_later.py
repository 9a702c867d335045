"""The reviewer's instruments run after the verdict (leaderboard/evaluations/follow_up.py): the verdict
is stored without them, a follow-up on the hardware's lower-priority queue merges what they found,
an evaluation queued meanwhile goes first, and a follow-up for an outdated verdict merges nothing.
Real Redis and real workers for the ordering; the job functions in this process elsewhere."""

from __future__ import annotations

import pytest

from leaderboard.evaluations import jobs as job_functions
from leaderboard.evaluations.follow_up import VERDICT_DIFFERS, follow_up_job_id
from leaderboard.evaluations.queue import eval_queue, redis_connection, request_evaluation
from leaderboard.evaluations.sweep import sweep_evaluations
from leaderboard.models import DirtyProblem, Evaluation

from .conftest import fake_calls, fake_source, submit

FAKE = "tests.integration.fake_evaluation.evaluate"


@pytest.fixture
def later(env, settings):
    """CPU evaluations run their instruments later, in the workers started here and in this process."""
    env["EVAL_INSTRUMENTS_LATER"] = "cpu"
    settings.EVAL_INSTRUMENTS_LATER = frozenset({"cpu"})
    settings.EVAL_FUNCTION = FAKE
    return env


def evaluated(kernel_source: str, make_kernels, cpu) -> Evaluation:
    """A verdict stored by the evaluation's job, run in this process."""
    (evaluation,) = submit(make_kernels([kernel_source]), cpu)
    assert job_functions.run_evaluation_job(evaluation.pk) == "done"
    return Evaluation.objects.get(pk=evaluation.pk)


def test_the_verdict_is_stored_before_the_instruments_which_wait_on_the_lower_queue(later, workers, make_kernels, cpu):
    (evaluation,) = submit(make_kernels([fake_source("first")]), cpu)

    workers.run_burst("--max-jobs", "1", fake=True)

    evaluation.refresh_from_db()
    assert (evaluation.state, evaluation.status, evaluation.speedup) == ("done", "correct", 1.5)
    assert evaluation.instruments == {} and evaluation.instruments_state == "queued"
    assert eval_queue("instruments-cpu").job_ids == [follow_up_job_id(evaluation.pk, 1)]
    assert fake_calls(later) == [("start", "first"), ("end", "first")]


def test_an_evaluation_queued_after_the_follow_up_runs_before_it(later, workers, make_kernels, cpu):
    (first,) = submit(make_kernels([fake_source("first")]), cpu)
    workers.run_burst("--max-jobs", "1", fake=True)
    (second,) = submit(make_kernels([fake_source("second")]), cpu)

    workers.run_burst(fake=True)

    starts = [marker for event, marker in fake_calls(later) if event == "start"]
    assert starts == ["first", "second", "first:instruments", "second:instruments"]
    first.refresh_from_db()
    assert first.instruments_state == "done" and first.instruments["determinism"] == {"equal": False}


def test_the_follow_up_merges_the_instruments_their_flags_and_their_seconds(later, make_kernels, cpu, settings):
    settings.BOARD_RESCORER = True  # marks wait for the re-scorer, where this test can see them
    evaluation = evaluated(fake_source("merged"), make_kernels, cpu)
    DirtyProblem.objects.all().delete()

    assert job_functions.run_instruments_job(evaluation.pk, evaluation.attempts) == "done"

    evaluation.refresh_from_db()
    assert evaluation.instruments_state == "done" and evaluation.instruments["determinism"] == {"equal": False}
    assert evaluation.flag_codes == ["nondeterministic"]
    assert evaluation.stage_seconds["eval_instruments"] == 0.5
    assert evaluation.stage_seconds["instruments_later_total"] == 1.25
    assert (evaluation.status, evaluation.speedup) == ("correct", 1.5)
    assert DirtyProblem.objects.filter(problem_id=evaluation.kernel.problem_id).exists()  # the board re-scores it


def test_a_follow_up_whose_own_run_disagrees_flags_it_and_keeps_the_verdict(later, make_kernels, cpu):
    evaluation = evaluated(fake_source("wobbly", "later_status=incorrect"), make_kernels, cpu)

    assert job_functions.run_instruments_job(evaluation.pk, evaluation.attempts) == "done"

    evaluation.refresh_from_db()
    assert (evaluation.status, evaluation.correct, evaluation.speedup) == ("correct", True, 1.5)
    differs = next(f for f in evaluation.flags if f["code"] == VERDICT_DIFFERS)
    assert "found it incorrect where its verdict says correct" in differs["message"]


def test_a_kernel_surely_slower_than_the_reference_owes_no_instruments(later, make_kernels, cpu):
    evaluation = evaluated(fake_source("slow", "speedup=0.5"), make_kernels, cpu)

    assert evaluation.correct and evaluation.instruments_state == ""
    assert eval_queue("instruments-cpu").job_ids == []


def test_a_follow_up_for_a_kernel_evaluated_again_meanwhile_is_dropped_unrun(later, make_kernels, cpu):
    evaluation = evaluated(fake_source("again"), make_kernels, cpu)
    request_evaluation(evaluation.kernel, cpu)

    assert job_functions.run_instruments_job(evaluation.pk, evaluation.attempts) == "dropped"

    evaluation.refresh_from_db()
    assert evaluation.instruments_state == "dropped" and evaluation.instruments == {}
    assert ("start", "again:instruments") not in fake_calls(later)


def test_a_follow_up_for_a_deleted_evaluation_does_nothing(later, make_kernels, cpu):
    evaluation = evaluated(fake_source("gone"), make_kernels, cpu)
    Evaluation.objects.filter(pk=evaluation.pk).delete()

    assert job_functions.run_instruments_job(evaluation.pk, evaluation.attempts) == "skipped"
    assert ("start", "gone:instruments") not in fake_calls(later)


def test_a_follow_up_that_fails_on_our_side_is_swept_again_until_its_tries_are_used_up(
    later, make_kernels, cpu, settings
):
    evaluation = evaluated(fake_source("flaky", "later_raise"), make_kernels, cpu)
    for _ in range(settings.EVAL_MAX_ATTEMPTS):
        assert job_functions.run_instruments_job(evaluation.pk, evaluation.attempts) == "retrying"
        redis_connection().flushall()  # and Redis lost its job: the sweep enqueues the next try
        assert sweep_evaluations().follow_ups == 1
    tries = Evaluation.objects.get(pk=evaluation.pk).instruments_attempts
    assert eval_queue("instruments-cpu").job_ids == [follow_up_job_id(evaluation.pk, tries + 1)]

    assert job_functions.run_instruments_job(evaluation.pk, evaluation.attempts) == "skipped"

    evaluation.refresh_from_db()
    assert evaluation.instruments_state == "failed" and evaluation.status == "correct"
    assert evaluation.instruments["shapes"]["skipped"].endswith(f"failed {tries} times on our side")
