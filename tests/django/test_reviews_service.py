"""The review service: who is in the queue, verdicts kept as an audit trail, reruns, reports."""

import datetime as dt

import pytest
from django.core.exceptions import PermissionDenied
from django.test import override_settings
from django.utils import timezone

from leaderboard.models import Evaluation, Kernel, Review
from leaderboard.reviews.services import QueueFilters, kernel_review_state, record_verdict, report_kernel, review_queue
from tests.django.reviews_factories import report, review, world_fixture  # noqa: F401  (fixtures)

pytestmark = pytest.mark.django_db


def queued(filters=None) -> set[int]:
    return set(review_queue(filters).values_list("pk", flat=True))


def test_the_queue_lists_flagged_reported_and_fast_imported_kernels(world, visitor):
    flagged = world.kernel(world.problems[0], flags=("side_stream_work",))
    noted = world.kernel(world.problems[1], notes=("try_except_fallback",))
    reported = world.kernel(world.problems[2])
    report(reported, visitor)
    imported = world.kernel(world.problems[3], speedup=3.5, origin="imported")
    world.kernel(world.problems[0], sample=1, speedup=2.9, origin="imported")  # under the 3x threshold
    world.kernel(world.problems[1], sample=1, speedup=9.0)  # fast but measured here, unflagged
    world.kernel(world.problems[2], sample=1, notes=("speedup_uncertain",))  # a note that needs no look
    assert queued() == {flagged.pk, noted.pk, reported.pk, imported.pk}
    assert set(Kernel.objects.needing_review().values_list("pk", flat=True)) == queued()


def test_a_clean_verdict_takes_a_kernel_out_of_the_queue(world, reviewer):
    kernel = world.kernel(world.problems[0], flags=("excessive_speedup",))
    record_verdict(kernel, "clean", "checked by hand", by=reviewer)
    assert queued() == set()


def test_a_new_suspicious_evaluation_brings_it_back(world, reviewer):
    kernel = world.kernel(world.problems[0], flags=("excessive_speedup",))
    review(kernel, reviewer, "clean", at=timezone.now() - dt.timedelta(hours=1))
    world.evaluate(kernel, flags=("timing_mismatch",))
    assert queued() == {kernel.pk}


def test_a_report_after_the_verdict_brings_it_back_and_a_verdict_settles_it(world, reviewer, visitor):
    kernel = world.kernel(world.problems[0])
    review(kernel, reviewer, "clean", at=timezone.now() - dt.timedelta(hours=1))
    report(kernel, visitor)
    assert queued() == {kernel.pk}
    record_verdict(kernel, "clean", by=reviewer)
    assert queued() == set()


@override_settings(REVIEW_SPEEDUP_THRESHOLD=10.0)
def test_the_imported_speedup_threshold_comes_from_settings(world):
    world.kernel(world.problems[0], speedup=9.0, origin="imported")
    assert queued() == set()


def test_the_queue_filters_by_flag_level_model_and_reason(world, visitor):
    side = world.kernel(world.problems[0], flags=("side_stream_work", "timing_mismatch"))
    mutation = world.kernel(world.problems[1], flags=("input_mutation",))
    noted = world.kernel(world.problems[2], notes=("pytorch_only",))
    level2 = world.kernel(world.level2, flags=("excessive_speedup",))
    report(level2, visitor)
    assert queued(QueueFilters(flag="timing_mismatch")) == {side.pk}
    assert queued(QueueFilters(flag="pytorch_only")) == {noted.pk}
    assert queued(QueueFilters(flag="input")) == set()  # a code, not a prefix
    assert queued(QueueFilters(level=2)) == {level2.pk}
    assert queued(QueueFilters(model="m")) == {side.pk, mutation.pk, noted.pk, level2.pk}
    assert queued(QueueFilters(model="nobody")) == set()
    assert queued(QueueFilters(reason="reported")) == {level2.pk}


def test_a_message_that_quotes_a_code_does_not_match_it(world):
    kernel = world.kernel(world.problems[0], flags=("side_stream_work",))
    kernel.latest_evaluation.flags = [{"code": "side_stream_work", "message": 'looks like "code": "input_mutation"'}]
    kernel.latest_evaluation.save()
    assert queued(QueueFilters(flag="input_mutation")) == set()


def test_the_queue_sorts_by_speedup_and_date(world):
    now = timezone.now()
    slow = world.kernel(world.problems[0], speedup=1.1, flags=("timing_mismatch",), finished_at=now)
    fast = world.kernel(
        world.problems[1], speedup=8.0, flags=("timing_mismatch",), finished_at=now - dt.timedelta(days=2)
    )
    middle = world.kernel(
        world.problems[2], speedup=2.0, flags=("timing_mismatch",), finished_at=now - dt.timedelta(days=1)
    )

    def order(sort):
        return list(review_queue(QueueFilters(sort=sort)).values_list("pk", flat=True))

    assert order("speedup") == [fast.pk, middle.pk, slow.pk]
    assert order("-speedup") == [slow.pk, middle.pk, fast.pk]
    assert order("date") == [slow.pk, middle.pk, fast.pk]
    assert order("-date") == [fast.pk, middle.pk, slow.pk]


def test_every_verdict_is_kept_with_who_and_when_and_the_latest_counts(world, reviewer, admin_user):
    kernel = world.kernel(world.problems[0], flags=("excessive_speedup",))
    record_verdict(kernel, "reward_hack", "returns a cached output", by=reviewer)
    record_verdict(kernel, "clean", "cache is legitimate memoisation? no: re-checking", by=admin_user)
    record_verdict(kernel, "invalid", "wrong for other shapes", by=reviewer)
    trail = kernel_review_state(kernel).reviews
    assert [(r.verdict, r.reviewer.username) for r in trail] == [
        ("invalid", "reviewer"),
        ("clean", "admin"),
        ("reward_hack", "reviewer"),
    ]
    assert all(r.created_at is not None for r in trail)
    assert trail[0].created_at >= trail[1].created_at >= trail[2].created_at
    state = kernel_review_state(kernel)
    assert state.excluded and state.exclusion.note == "wrong for other shapes"
    assert Kernel.objects.excluded().get() == kernel
    assert not Kernel.objects.counted().exists()


def test_needs_rerun_queues_a_fresh_evaluation(world, reviewer, django_capture_on_commit_callbacks):
    kernel = world.kernel(world.problems[0], flags=("timing_mismatch",))
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        result = record_verdict(kernel, "rerun", "noisy host", by=reviewer)
    assert result.evaluation.state == Evaluation.State.QUEUED
    assert result.evaluation.kernel == kernel and result.evaluation.hardware == world.hardware
    assert Evaluation.objects.filter(kernel=kernel, state="queued").count() == 1
    assert len(callbacks) == 1  # the job is enqueued once the verdict commits
    assert result.review.verdict == Review.Verdict.RERUN
    assert queued() == set()  # parked until the new evaluation lands


def test_a_second_rerun_reuses_the_waiting_evaluation(world, reviewer):
    kernel = world.kernel(world.problems[0])
    first = record_verdict(kernel, "rerun", by=reviewer).evaluation
    second = record_verdict(kernel, "rerun", by=reviewer).evaluation
    assert first == second and Review.objects.filter(kernel=kernel).count() == 2


def test_only_reviewers_record_verdicts(world, visitor, ingestor):
    kernel = world.kernel(world.problems[0])
    for user in (visitor, ingestor):
        with pytest.raises(PermissionDenied):
            record_verdict(kernel, "clean", by=user)
    assert not Review.objects.exists()


def test_reporting_twice_before_a_verdict_keeps_one_open_report(world, visitor):
    kernel = world.kernel(world.problems[0])
    first = report_kernel(kernel, " too fast ", by=visitor)
    again = report_kernel(kernel, "still too fast", by=visitor)
    assert first.created and not again.created and again.report == first.report
    assert first.report.reason == "too fast"
