"""Highlighted source and diffs for the problem and kernel pages.

Diffs are returned as plain data (line numbers, text, kind), and their table rows are written here
(`Diff.split_html`, `Diff.unified_html`) with every text escaped by django.utils.html.escape: a
template loop over thousands of rows cost 2.2 s of CPU for two 800-line kernels on a busy host,
this costs a few milliseconds. Pygments' output is marked safe too, because Pygments escapes every
character of the source it is given (`&`, `<`, `>`, `"`, `'`) and adds nothing but its own span
tags; a source over HIGHLIGHT_MAX_BYTES is shown escaped and unhighlighted, since Pygments costs
seconds a megabyte and kernel pages are public (anyone could make the host spend them).

Both are kept in the shared cache, keyed by the SHA-256 of the text they were made from (and the
labels and anchor they carry): a kernel page's highlighted source and its diff against the reference
cost milliseconds to tens of them for a real kernel on every visit, and their result is a function
of those texts alone, so a changed source (a new kernel, an edited reference) is a new key and never
reads an old entry. What is kept is what these functions made, escaped as above.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from django.core.cache import cache
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import PythonLexer

from leaderboard.reads.line_diff import Opcode, diff_lines, grouped

# Beyond this many lines a diff is not worth computing for a page (sources are capped at 1 MB).
MAX_DIFF_LINES = 4000
# The work one diff may cost (line_diff's steps; about 0.05 s of CPU on an idle core; a kernel page
# makes two). Pages are public, so a pair of sources too different to align within it is shown side
# by side instead, unaligned. A 200-line kernel against a 40-line reference takes about 50,000.
MAX_DIFF_STEPS = 200_000
CONTEXT_LINES = 3
# Beyond this a source is shown without highlighting (kernels are capped at 1 MB; real ones are
# tens of kB).
HIGHLIGHT_MAX_BYTES = 100_000
UNIFIED_MARKS = {"delete": "-", "insert": "+", "equal": " ", "hunk": ""}
KEPT_SECONDS = 24 * 3600  # a kept rendering is the same forever; the limit only bounds memory
# Part of every key: a change to how sources are highlighted or diffs drawn is a new key.
RENDERING = "1"

T = TypeVar("T")


def _kept(kind: str, parts: tuple[str, ...], make: Callable[[], T]) -> T:
    """`make()`, kept in the cache under the SHA-256 of `parts` (the texts and labels it is made of)."""
    digest = hashlib.sha256("\0".join((RENDERING, *parts)).encode("utf-8", "surrogatepass")).hexdigest()
    return cache.get_or_set(f"{kind}:{digest}", make, KEPT_SECONDS)


def highlight_python(source: str, anchor: str = "L") -> SafeString:
    """`source` as highlighted HTML with line numbers. Pygments escapes the source text itself,
    so the generated HTML is safe to mark as such even for untrusted kernels. Over
    HIGHLIGHT_MAX_BYTES, the source escaped, without highlighting or line numbers. Kept (`_kept`)."""
    return _kept("highlight", (anchor, source), lambda: _highlighted(source, anchor))


def _highlighted(source: str, anchor: str) -> SafeString:
    if len(source) > HIGHLIGHT_MAX_BYTES:
        return mark_safe(  # noqa: S308 — escaped
            f'<p class="muted small">Too long to highlight here ({len(source)} characters).</p>'
            f'<div class="highlight"><pre>{escape(source)}</pre></div>'
        )
    formatter = HtmlFormatter(
        cssclass="highlight", linenos="table", lineanchors=anchor, anchorlinenos=True, wrapcode=True
    )
    return mark_safe(highlight(source, PythonLexer(stripnl=False, ensurenl=True), formatter))  # noqa: S308 — Pygments-escaped


@dataclass(frozen=True)
class SideBySideRow:
    kind: str  # "equal", "replace", "delete", "insert", "skip"
    left_no: int | None
    left: str
    right_no: int | None
    right: str


@dataclass(frozen=True)
class UnifiedLine:
    kind: str  # "equal", "delete", "insert", "hunk"
    left_no: int | None
    right_no: int | None
    text: str


@dataclass(frozen=True)
class Diff:
    left_label: str
    right_label: str
    side_by_side: list[SideBySideRow]
    unified: list[UnifiedLine]
    added: int
    removed: int
    too_large: bool = False
    too_different: bool = False  # over MAX_DIFF_STEPS: the rows hold both sources, unaligned

    @property
    def identical(self) -> bool:
        return not self.too_large and self.added == 0 and self.removed == 0

    @property
    def split_html(self) -> SafeString:
        """The side-by-side table's rows; every text escaped."""
        return mark_safe("".join(map(_split_row, self.side_by_side)))  # noqa: S308 — escaped

    @property
    def unified_html(self) -> SafeString:
        """The unified table's rows; every text escaped."""
        return mark_safe("".join(map(_unified_row, self.unified)))  # noqa: S308 — escaped


def _number(line: int | None) -> str:
    return "" if line is None else str(line)


def _split_row(row: SideBySideRow) -> str:
    if row.kind == "skip":
        return '<tr class="diff-skip"><td colspan="4">⋯</td></tr>'
    return (
        f'<tr class="diff-{row.kind}"><td class="ln">{_number(row.left_no)}</td><td class="code left">'
        f'{escape(row.left)}</td><td class="ln">{_number(row.right_no)}</td><td class="code right">'
        f"{escape(row.right)}</td></tr>"
    )


def _unified_row(line: UnifiedLine) -> str:
    return (
        f'<tr class="diff-{line.kind}"><td class="ln">{_number(line.left_no)}</td><td class="ln">'
        f'{_number(line.right_no)}</td><td class="code">{UNIFIED_MARKS[line.kind]}{escape(line.text)}</td></tr>'
    )


def compute_diff(left: str, right: str, left_label: str, right_label: str) -> Diff:
    """Line diff of `left` -> `right`, both as side-by-side rows and unified lines, with
    CONTEXT_LINES of context around each change. Costs at most MAX_DIFF_STEPS of line_diff's work
    on top of the linear reading and rendering of at most MAX_DIFF_LINES lines a side. Kept
    (`_kept`)."""
    return _kept("diff", (left, right, left_label, right_label), lambda: _diff(left, right, left_label, right_label))


def _diff(left: str, right: str, left_label: str, right_label: str) -> Diff:
    a, b = left.splitlines(), right.splitlines()
    if len(a) > MAX_DIFF_LINES or len(b) > MAX_DIFF_LINES:
        return Diff(left_label, right_label, [], [], 0, 0, too_large=True)
    opcodes = diff_lines(a, b, MAX_DIFF_STEPS).opcodes
    if opcodes is None:
        rows, lines = _rows(a, b, [[("replace", 0, len(a), 0, len(b))]])
        return Diff(left_label, right_label, rows, lines, len(b), len(a), too_different=True)
    rows, lines = _rows(a, b, grouped(opcodes, CONTEXT_LINES))
    added = sum(j2 - j1 for tag, _i1, _i2, j1, j2 in opcodes if tag != "equal")
    removed = sum(i2 - i1 for tag, i1, i2, _j1, _j2 in opcodes if tag != "equal")
    return Diff(left_label, right_label, rows, lines, added, removed)


def _rows(a: list[str], b: list[str], groups: list[list[Opcode]]) -> tuple[list[SideBySideRow], list[UnifiedLine]]:
    """The side-by-side rows and unified lines of hunks of opcodes."""
    rows: list[SideBySideRow] = []
    lines: list[UnifiedLine] = []
    for group in groups:
        first, last = group[0], group[-1]
        if rows:
            rows.append(SideBySideRow("skip", None, "", None, ""))
        lines.append(
            UnifiedLine(
                "hunk", None, None, f"@@ -{first[1] + 1},{last[2] - first[1]} +{first[3] + 1},{last[4] - first[3]} @@"
            )
        )
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                for offset in range(i2 - i1):
                    i, j = i1 + offset, j1 + offset
                    rows.append(SideBySideRow("equal", i + 1, a[i], j + 1, b[j]))
                    lines.append(UnifiedLine("equal", i + 1, j + 1, a[i]))
                continue
            for offset in range(max(i2 - i1, j2 - j1)):
                i, j = i1 + offset, j1 + offset
                left_here, right_here = i < i2, j < j2
                kind = "replace" if left_here and right_here else ("delete" if left_here else "insert")
                rows.append(
                    SideBySideRow(
                        kind,
                        i + 1 if left_here else None,
                        a[i] if left_here else "",
                        j + 1 if right_here else None,
                        b[j] if right_here else "",
                    )
                )
            lines.extend(UnifiedLine("delete", i + 1, None, a[i]) for i in range(i1, i2))
            lines.extend(UnifiedLine("insert", None, j + 1, b[j]) for j in range(j1, j2))
    return rows, lines
