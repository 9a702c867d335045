"""Per-user quotas on work and storage, so that one user cannot fill the queue or the disk (one
`verify` queued 200 jobs): how many evaluations one user may have queued or running, and how many
bytes of kernel source one user may have stored.

A write checks its quota inside its own transaction before (or while) writing, and QuotaExceeded
rolls the whole write back: nothing is half stored. Views answer it with its `status` (429 for the
evaluations, which free themselves as the queue drains; 409 for storage, which does not) and its
message, which names the quota, the setting and the numbers. The server's own commands (user
None) are exempt.
"""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db.models import Sum

from leaderboard.models import Evaluation, Kernel


class QuotaExceeded(Exception):
    def __init__(self, message: str, status: int):
        super().__init__(message)
        self.status = status


def _counted(user) -> bool:
    """Whether `user`'s writes count against a quota; if so, lock the user's row for the rest of the
    transaction, so that two concurrent requests of one user check one after the other."""
    if user is None or not getattr(user, "is_authenticated", False):
        return False
    list(get_user_model().objects.select_for_update().filter(pk=user.pk).values_list("pk"))
    return True


def check_pending_evaluations(user, adding: int) -> None:
    """QuotaExceeded (429) when `adding` more evaluations would take `user` past
    EVAL_MAX_PENDING_PER_USER queued or running."""
    if adding <= 0 or not _counted(user):
        return
    limit = settings.EVAL_MAX_PENDING_PER_USER
    pending = Evaluation.objects.pending().filter(requested_by=user).count()
    if pending + adding > limit:
        raise QuotaExceeded(
            f"quota of queued-or-running evaluations per user (EVAL_MAX_PENDING_PER_USER) exceeded: you have "
            f"{pending} queued or running and asked for {adding} more; the limit is {limit}. Nothing was queued; "
            "ask again when some have finished",
            429,
        )


def check_source_bytes(user, adding: int) -> None:
    """QuotaExceeded (409) when `adding` more bytes of kernel source would take `user` past
    KERNEL_SOURCE_MAX_BYTES_PER_USER stored."""
    if adding <= 0 or not _counted(user):
        return
    limit = settings.KERNEL_SOURCE_MAX_BYTES_PER_USER
    stored = Kernel.objects.filter(submitted_by=user).aggregate(total=Sum("source_bytes"))["total"] or 0
    if stored + adding > limit:
        raise QuotaExceeded(
            f"quota of stored kernel source per user (KERNEL_SOURCE_MAX_BYTES_PER_USER) exceeded: you have "
            f"{stored} bytes stored and this adds {adding}; the limit is {limit} bytes. Nothing was stored",
            409,
        )
