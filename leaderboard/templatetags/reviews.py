"""The kernel page's review panel: `{% review_panel kernel request.user as panel %}`.

Used by templates/reviews/_kernel_panel.html, which the kernel page includes, so the page's view
needs to pass nothing but the kernel. Nothing here marks text safe.
"""

from __future__ import annotations

from dataclasses import dataclass

from django import template
from django.conf import settings

from leaderboard.models import Kernel, KernelReport, Review
from leaderboard.reviews import services as reviews
from leaderboard.reviews.forms import ReportForm, VerdictForm

register = template.Library()


@dataclass
class ReviewPanel:
    state: reviews.KernelReviewState
    can_review: bool
    can_report: bool
    needs_review: bool
    why_queued: list[str]
    my_open_report: KernelReport | None
    verdict_form: VerdictForm | None
    report_form: ReportForm | None

    @property
    def verdict_choices(self) -> list[tuple[str, str]]:
        return list(Review.Verdict.choices)


def _published_claim(kernel: Kernel) -> str:
    claim = (
        f"its published speedup ({kernel.published_speedup:g}x, {kernel.published_label}) is above "
        f"{settings.REVIEW_PUBLISHED_SPEEDUP_THRESHOLD:g}x"
    )
    measured = kernel.latest_evaluation.speedup if kernel.latest_evaluation_id else None
    if kernel.latest_evaluation_id is None:
        return claim + "; not measured here yet"
    return claim + (f"; measured here: {measured:g}x" if measured else "; measured here: no speedup (not correct)")


@register.simple_tag
def review_panel(kernel: Kernel, user) -> ReviewPanel:
    state = reviews.kernel_review_state(kernel)
    flags = {}
    # Why it is queued: the rules read live, for a kernel the queue lists (its stored state, by
    # which the queue selects) only: building and compiling them cost about 10 ms of every page.
    if kernel.review_pending:
        flags = (
            Kernel.objects.with_review_state()
            .filter(pk=kernel.pk)
            .values("needs_review", "is_flagged", "is_reported", "is_high_imported", "is_high_published")
            .first()
            or {}
        )
    why = []
    if flags.get("needs_review"):
        if flags.get("is_flagged"):
            codes = [f.get("code", "") for f in state.flags] + [n.get("code", "") for n in state.review_notes]
            why.append("flagged by the scoring library: " + ", ".join(code for code in codes if code))
        if flags.get("is_reported"):
            n = len(state.open_reports)
            why.append(f"reported by {n} visitor{'s' if n != 1 else ''}")
        if flags.get("is_high_imported"):
            why.append(f"imported unverified with a speedup above {settings.REVIEW_SPEEDUP_THRESHOLD:g}x")
        if flags.get("is_high_published"):
            why.append(_published_claim(kernel))
    can_review = reviews.can_review(user)
    signed_in = bool(user is not None and user.is_authenticated)
    my_report = reviews.open_report_by(kernel, user) if signed_in else None
    return ReviewPanel(
        state=state,
        can_review=can_review,
        can_report=signed_in,
        needs_review=bool(flags.get("needs_review")),
        why_queued=why,
        my_open_report=my_report,
        verdict_form=VerdictForm() if can_review else None,
        report_form=ReportForm() if signed_in and my_report is None else None,
    )


@register.filter
def flag_meaning(code: str) -> str:
    """What a flag or note code means, from the scoring library's list ('' when unknown)."""
    return dict(reviews.flag_choices()).get(str(code), "")


@register.filter
def verdict_label(code: str | None) -> str:
    """A verdict code as people read it ('reward_hack' -> 'reward hack')."""
    return dict(Review.Verdict.choices).get(str(code), "") if code else ""
