"""Model signals that keep the boards' read model current whatever path writes (admin, factories,
services): each marks the affected run in the writing transaction, for the background re-scorer
(leaderboard/boards/): only the kernel's problem where the write changes one kernel
(its result, a review, the kernel added or deleted), the whole run otherwise.

Bulk writes (bulk_create, QuerySet.update) send no signals: their code calls board_marks.mark_runs
itself (run import, baseline import, the worker).

The kept featured set follows run and problem-set writes through its own signals
(leaderboard/reads/board/featured_signals.py)."""

from __future__ import annotations

from django.contrib.auth.models import User
from django.db.models.signals import post_delete, post_save, pre_delete, pre_save
from django.dispatch import receiver

from leaderboard.boards import marks as board_marks
from leaderboard.boards import rescoring as board_rescoring
from leaderboard.models import (
    Evaluation,
    Kernel,
    KernelReport,
    Lab,
    LanguageModel,
    LaunchPost,
    ReportedScore,
    Review,
    Run,
)
from problems.models import Baseline, Hardware, Problem, ProblemSet


def _place_of_kernel(kernel_id: int | None, cached: Kernel | None) -> list[tuple[int, int]]:
    """[(run id, problem id)] of a kernel (none when it is gone)."""
    if cached is not None:
        return [(cached.run_id, cached.problem_id)]
    return list(
        Kernel.objects.filter(pk=kernel_id).order_by().values_list("run_id", "problem_id")[:1]
    )  # no join to order one row


def _cached_kernel(instance) -> Kernel | None:
    return instance._state.fields_cache.get("kernel")


# A save that names its fields and none of these leaves the kernel where it was.
_MOVING_FIELDS = {"run", "run_id", "problem", "problem_id"}


@receiver(post_save, sender=Kernel, dispatch_uid="boards-kernel-saved")
def kernel_saved(sender, instance: Kernel, created: bool, update_fields=None, **kwargs) -> None:
    if not created:  # a new kernel has no evaluation or review yet: nothing to store for it now
        board_rescoring.refresh_kernel_states([instance.pk])
    if created or (update_fields is not None and not _MOVING_FIELDS & set(update_fields)):
        board_marks.mark_problems([(instance.run_id, instance.problem_id)])
    else:  # an edit may have moved it to another run or problem: its old place is not known here
        board_marks.mark_runs([instance.run_id])


@receiver(post_delete, sender=Kernel, dispatch_uid="boards-kernel-deleted")
def kernel_deleted(sender, instance: Kernel, **kwargs) -> None:
    board_marks.mark_problems([(instance.run_id, instance.problem_id)])


@receiver(post_save, sender=Evaluation, dispatch_uid="boards-evaluation-saved")
@receiver(post_delete, sender=Evaluation, dispatch_uid="boards-evaluation-deleted")
def evaluation_changed(sender, instance: Evaluation, **kwargs) -> None:
    if kwargs.get("created") and instance.state != Evaluation.State.DONE:
        return  # a newly queued evaluation changes no score
    board_marks.mark_problems(_place_of_kernel(instance.kernel_id, _cached_kernel(instance)))


@receiver(post_save, sender=Review, dispatch_uid="boards-review-saved")
@receiver(post_delete, sender=Review, dispatch_uid="boards-review-deleted")
@receiver(post_save, sender=KernelReport, dispatch_uid="boards-report-saved")
@receiver(post_delete, sender=KernelReport, dispatch_uid="boards-report-deleted")
def review_changed(sender, instance, **kwargs) -> None:
    board_rescoring.refresh_kernel_states([instance.kernel_id])
    board_marks.mark_problems(_place_of_kernel(instance.kernel_id, _cached_kernel(instance)))


@receiver(pre_save, sender=User, dispatch_uid="boards-user-renaming")
def user_renaming(sender, instance: User, update_fields=None, **kwargs) -> None:
    """Note a reviewer's or reporter's old name: the kernel pages kept for visitors show it."""
    instance._kb_renamed = False
    if instance.pk is None or (update_fields is not None and "username" not in update_fields):
        return  # a new user, or a save of other fields (a sign-in's last_login)
    old = User.objects.filter(pk=instance.pk).values_list("username", flat=True).first()
    instance._kb_renamed = old is not None and old != instance.username


@receiver(post_save, sender=User, dispatch_uid="boards-user-renamed")
def user_renamed(sender, instance: User, **kwargs) -> None:
    if not getattr(instance, "_kb_renamed", False):
        return
    named = {*Review.objects.filter(reviewer=instance).values_list("kernel_id", flat=True)}
    named |= {*KernelReport.objects.filter(reporter=instance).values_list("kernel_id", flat=True)}
    board_marks.mark_problems(Kernel.objects.filter(pk__in=named).values_list("run_id", "problem_id"))


@receiver(pre_delete, sender=Run, dispatch_uid="boards-run-deleted")
def run_deleted(sender, instance: Run, **kwargs) -> None:
    board_rescoring.forget_run(instance.pk)
    # Its row leaves its set's boards, and its count its model's page and the lists: what was kept
    # of them is stale (a deleted run is re-scored by nobody, so no pass would move the version).
    board_rescoring.bump_versions({instance.problem_set_id})


@receiver(post_save, sender=Run, dispatch_uid="boards-run-saved")
def run_saved(sender, instance: Run, created: bool, **kwargs) -> None:
    if created:
        board_marks.mark_runs([instance.pk])  # an empty run still has a row on its boards
    else:
        board_rescoring.bump_versions({instance.problem_set_id})  # its setting, name or origin shows


@receiver(post_save, sender=LanguageModel, dispatch_uid="boards-model-saved")
@receiver(post_delete, sender=LanguageModel, dispatch_uid="boards-model-deleted")
@receiver(post_save, sender=Lab, dispatch_uid="boards-lab-saved")
@receiver(post_delete, sender=Lab, dispatch_uid="boards-lab-deleted")
@receiver(post_save, sender=ReportedScore, dispatch_uid="boards-reported-saved")
@receiver(post_delete, sender=ReportedScore, dispatch_uid="boards-reported-deleted")
@receiver(post_save, sender=LaunchPost, dispatch_uid="boards-post-saved")
@receiver(post_delete, sender=LaunchPost, dispatch_uid="boards-post-deleted")
@receiver(post_save, sender=Hardware, dispatch_uid="boards-hardware-saved")
@receiver(post_delete, sender=Hardware, dispatch_uid="boards-hardware-deleted")
@receiver(post_save, sender=ProblemSet, dispatch_uid="boards-problem-set-saved")
@receiver(post_delete, sender=ProblemSet, dispatch_uid="boards-problem-set-deleted")
@receiver(post_save, sender=Problem, dispatch_uid="boards-problem-saved")
@receiver(post_delete, sender=Problem, dispatch_uid="boards-problem-deleted")
def shown_beside_scores_changed(sender, **kwargs) -> None:
    """Names and reported scores show on every board and the overview, and so do hardware names
    (a run's column and the filter), problem set names and their problem counts (the set picker;
    fast_p's denominator): every cached board is stale (else a Hardware rename leaves 304s and
    cached 200s with the old name)."""
    board_rescoring.bump_all_versions()


@receiver(post_save, sender=Baseline, dispatch_uid="boards-baseline-saved")
@receiver(post_delete, sender=Baseline, dispatch_uid="boards-baseline-deleted")
def baseline_changed(sender, instance: Baseline, **kwargs) -> None:
    """A problem's baselines show on its page, which is kept as the boards are (served.py)."""
    board_rescoring.bump_versions(
        set(Problem.objects.filter(pk=instance.problem_id).values_list("problem_set_id", flat=True))
    )
