"""The review queue's rows, built in Python: a template row with a dozen conditions, includes and
filters cost about a millisecond a row, most of the page's time. Every piece of text is escaped here
(django.utils.html.escape), or is the output of a template or filter that escapes, before a row is
marked safe. The formatting is the templates' own: the same filters, called here."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from django import template
from django.template.defaultfilters import floatformat
from django.template.loader import render_to_string
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe
from django.utils.timezone import template_localtime

from leaderboard.models import REVIEW_NOTE_CODES, Kernel
from leaderboard.templatetags.leaderboard_tags import times
from leaderboard.templatetags.reviews import flag_meaning, verdict_label

register = template.Library()


@register.simple_tag
def queue_rows(kernels: Iterable[Kernel], threshold: float, published_threshold: float) -> SafeString:
    """The queue table's rows (each kernel with its `figures` set by the view)."""
    badges: dict[str, str] = {}  # origin -> its badge, from the one template that words it
    rows = []
    for kernel in kernels:
        evaluation = kernel.latest_evaluation
        origin = (evaluation.origin if evaluation else "") or kernel.run.origin
        if origin not in badges:
            badges[origin] = render_to_string("leaderboard/includes/origin_badge.html", {"origin": origin})
        problem, run = kernel.problem, kernel.run
        rows.append(
            f'<tr data-kernel="{int(kernel.pk)}">'
            f'<td><a href="{escape(kernel.get_absolute_url())}#review">kernel {int(kernel.pk)}</a></td>'
            f"<td>L{int(problem.level)} #{int(problem.number)} {escape(problem.name)}</td>"
            f'<td>{escape(run.model.name)}<div class="muted small">{escape(run.setting)} · '
            f"{escape(run.hardware.slug)}</div></td>"
            f"<td>{badges[origin]}</td>"
            f'<td class="num">{_speedup(kernel)}</td>'
            f"{_figures(kernel.figures)}"
            f'<td class="small">{_why(kernel, threshold, published_threshold)}</td>'
            f'<td class="nowrap">{_date(kernel.latest_report_at, "%Y-%m-%d %H:%M") or _date(kernel.evaluated_at, "%Y-%m-%d %H:%M")}</td>'
            f"<td>{_verdict(kernel)}</td></tr>"
        )
    return mark_safe("\n".join(rows))  # noqa: S308 - every piece above is escaped, a number or fixed markup


def _date(value: datetime | None, form: str) -> str:
    """`value` in the site's time zone as `form` (strftime: the `date` filter's "Y-m-d H:i" is
    "%Y-%m-%d %H:%M", at a tenth of its cost), '' when missing."""
    return template_localtime(value).strftime(form) if value else ""


def _speedup(kernel: Kernel) -> str:
    shown = escape(times(kernel.latest_evaluation.speedup if kernel.latest_evaluation else None))
    if not kernel.published_speedup:
        return shown
    claim = f"claimed {times(kernel.published_speedup)} ({kernel.published_label})"
    return f'{shown}<div class="muted small" data-claim="{int(kernel.pk)}">{escape(claim)}</div>'


def _figures(figures: dict[str, float | None]) -> str:
    """The instruments' four cells: shares as whole percents (as `widthratio x 0.01 1` rounds), the
    error against fp64 to one decimal."""
    cells = []
    for name in ("sol", "precision", "margin", "busy"):
        value = figures.get(name)
        if value is None:
            shown = "–"
        elif name == "precision":
            shown = f"{escape(floatformat(value, 1))}×"
        else:
            shown = f"{round(value / 0.01)}%"
        cells.append(f'<td class="num" data-figure="{name}">{shown}</td>')
    return "".join(cells)


def _code(code: object) -> str:
    return f'<code title="{escape(flag_meaning(code))}">{escape(code)}</code> '


def _why(kernel: Kernel, threshold: float, published_threshold: float) -> str:
    """Why the kernel is queued: its flags and review notes, a report, an imported or published claim."""
    evaluation = kernel.latest_evaluation
    parts = []
    if kernel.is_flagged and evaluation is not None:
        parts += [_code(flag.get("code", "")) for flag in evaluation.flags or [] if isinstance(flag, dict)]
        notes = [note for note in evaluation.notes or [] if isinstance(note, dict)]
        parts += [_code(note.get("code")) for note in notes if note.get("code") in REVIEW_NOTE_CODES]
    if kernel.is_reported:
        parts.append(f'<span class="badge review-needed">reported {_date(kernel.latest_report_at, "%Y-%m-%d")}</span>')
    if kernel.is_high_imported:
        parts.append(f'<span class="badge imported">imported above {escape(floatformat(threshold, "-2"))}x</span>')
    if kernel.is_high_published:
        measured = ", re-measured here" if evaluation else ", not measured here yet"
        above = escape(floatformat(published_threshold, "-2"))
        parts.append(f'<span class="badge imported">published claim above {above}x{measured}</span>')
    return "".join(parts)


def _verdict(kernel: Kernel) -> str:
    if not kernel.latest_verdict:
        return "–"
    reviewed = _date(kernel.latest_review_at, "%Y-%m-%d")
    return f'{escape(verdict_label(kernel.latest_verdict))} <span class="muted small">{reviewed}</span>'
