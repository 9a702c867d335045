"""Signals that keep the featured problem set (leaderboard/reads/board/featured.py) current: a
write to a run or a problem set may change the choice, so it is forgotten at once (a read meanwhile
counts again) and kept again once the write commits (counted by the writer, never by the requests
after it)."""

from __future__ import annotations

from django.db import transaction
from django.db.models.signals import post_delete, post_save
from django.dispatch import receiver

from leaderboard.models import Run
from leaderboard.reads.board import featured
from problems.models import ProblemSet


@receiver(post_save, sender=Run, dispatch_uid="featured-run-saved")
@receiver(post_delete, sender=Run, dispatch_uid="featured-run-deleted")
@receiver(post_save, sender=ProblemSet, dispatch_uid="featured-set-saved")
@receiver(post_delete, sender=ProblemSet, dispatch_uid="featured-set-deleted")
def runs_of_sets_changed(sender, **kwargs) -> None:
    """The choice may change: forgotten now, kept once the write commits."""
    featured.forget_featured()
    transaction.on_commit(featured.keep_featured, robust=True)
