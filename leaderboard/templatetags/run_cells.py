"""The run page's sample cells, built in Python: a run has up to thousands of samples, and a
template `{% include %}` per cell made rendering the slowest part of the page by far. Every piece
of text is escaped here (the standard library's html.escape: the entities Django's escape writes)
before the cell is marked safe."""

from __future__ import annotations

from functools import lru_cache
from html import escape  # Django's escape writes the same five entities, at several times the cost a call

from django import template
from django.urls import reverse
from django.utils.safestring import SafeString, mark_safe

from leaderboard.reads.runs import CompareLine, ProblemLine, Sample

register = template.Library()


@lru_cache(maxsize=1)
def _kernel_url_prefix() -> str:
    """/kernels/ (from the URL conf, once): reverse() per cell costs more than the cell itself."""
    return reverse("kernel-detail", args=[0]).removesuffix("0/")


def _verdict(s: Sample) -> str:
    if not s.status:
        return '<span class="status">not evaluated</span>'
    verdict = f'<span class="status status-{escape(s.status)}">{escape(s.status_label)}</span>'
    if not s.correct:
        return verdict
    if s.speedup:
        return f"{verdict} {s.speedup:.2f}x"
    return f'{verdict} <span class="muted" title="correct, no baseline on this hardware">unscored</span>'


@register.simple_tag
def sample_cell(s: Sample | None) -> SafeString:
    """One sample: its verdict and speedup (a link to its kernel), then its pending state, origin,
    flags and exclusion."""
    if s is None:
        return mark_safe('<span class="muted">–</span>')
    title = escape(f"kernel {s.kernel_id}, sample {s.sample}, {s.backend}")
    parts = [
        f'<a href="{_kernel_url_prefix()}{int(s.kernel_id)}/" class="sample-cell" title="{title}">{_verdict(s)}</a>'
    ]
    if s.pending:
        parts.append(f' <span class="status status-{escape(s.pending)}">{escape(s.pending)}</span>')
    if s.origin == "imported":
        parts.append(' <span class="badge imported" title="imported, unverified">imp</span>')
    parts += [f' <code class="flag">{escape(str(code))}</code>' for code in s.flags]
    if s.excluded:
        parts.append(' <span class="badge excluded">excluded</span>')
    return mark_safe("".join(parts))  # noqa: S308 - every piece above is escaped or fixed markup


@lru_cache(maxsize=1)
def _problem_url_prefix() -> str:
    return reverse("problem-detail", args=[0]).removesuffix("0/")


def _others(line: ProblemLine) -> str:
    return "".join(
        f'<div><span class="muted small">#{int(s.sample)}</span> {sample_cell(s)}</div>'
        for s in line.samples
        if s.sample != 0
    )


@register.simple_tag
def problem_rows(lines: list[ProblemLine], several: bool) -> SafeString:
    """The rows of the problems table: each problem, its sample 0, and (with `several`) the others."""
    rows = []
    for line in lines:
        name = escape(f"L{line.level} #{line.number} {line.name}")
        cells = f'<td><a href="{_problem_url_prefix()}{int(line.problem_id)}/">{name}</a></td><td>{sample_cell(line.first)}</td>'
        if several:
            cells += f"<td>{_others(line)}</td>"
        rows.append(f'<tr id="problem-{int(line.level)}-{int(line.number)}">{cells}</tr>')
    return mark_safe("\n".join(rows))  # noqa: S308 - every piece above is escaped or fixed markup


@register.simple_tag
def compare_rows(lines: list[CompareLine]) -> SafeString:
    """The rows of the comparison: each problem's sample 0 in both runs, the ratio of their
    speedups, and where only one of them is correct (those rows marked `differs`)."""
    rows = []
    for line in lines:
        ratio = f"{line.ratio:.2f}x" if line.ratio is not None else "–"
        marked = ' class="differs"' if line.verdict else ""
        rows.append(
            f"<tr{marked}><td>{escape(f'L{line.level} #{line.number} {line.name}')}</td>"
            f"<td>{sample_cell(line.left)}</td><td>{sample_cell(line.right)}</td>"
            f'<td class="num">{ratio}</td><td>{escape(line.verdict)}</td></tr>'
        )
    return mark_safe("\n".join(rows))  # noqa: S308 - every piece above is escaped or fixed markup
