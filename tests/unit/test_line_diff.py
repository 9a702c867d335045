"""leaderboard.reads.line_diff: the bounded line diff behind the kernel page (issue 19, case 2).

Property tests on random pairs of sources: the opcodes turn one into the other, the edit is no
longer than difflib's, and the work, counted in the module's steps (not wall time), stays within
Myers' O((N+M)·D) and never passes the budget by more than one diagonal's run."""

from __future__ import annotations

import difflib

from hypothesis import example, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from leaderboard.reads.line_diff import diff_lines, grouped

# Few distinct lines make long repetitive runs: the inputs that made difflib cubic.
lines = st.lists(st.sampled_from(["x = 1", "y = 2", "", "    return x", "import torch"]), max_size=120)


def edit_distance(opcodes) -> int:
    return sum((i2 - i1) + (j2 - j1) for tag, i1, i2, j1, j2 in opcodes if tag != "equal")


def applied(a, b, opcodes) -> list[str]:
    """b rebuilt from a and the opcodes (checking that they cover a in order and equal is equal)."""
    out, position = [], 0
    for tag, i1, i2, j1, j2 in opcodes:
        assert i1 == position and (tag != "equal" or a[i1:i2] == b[j1:j2])
        out.extend(a[i1:i2] if tag == "equal" else b[j1:j2])
        position = i2
    assert position == len(a)
    return out


@hsettings(max_examples=150, deadline=None)
@given(lines, lines)
def test_it_finds_a_shortest_edit_in_work_linear_in_the_sources_times_the_edit(a, b):
    result = diff_lines(a, b, max_steps=10**9)
    assert applied(a, b, result.opcodes) == b
    difflib_codes = difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes()
    d = edit_distance(result.opcodes)
    assert d <= edit_distance(difflib_codes)
    assert result.steps <= 4 * (len(a) + len(b) + 2) * (d + 1)


@hsettings(max_examples=150, deadline=None)
@given(lines, lines, st.integers(min_value=0, max_value=5000))
# Found by a CI run: the last round's bookkeeping was counted but not checked, 107 steps on this.
@example(a=[], b=["x = 1"] * 9, budget=84)
def test_its_work_never_passes_the_budget_by_more_than_one_run(a, b, budget):
    result = diff_lines(a, b, max_steps=budget)
    assert result.steps <= budget + 2 * (len(a) + len(b)) + 4
    if result.opcodes is not None:
        assert applied(a, b, result.opcodes) == b


def test_it_gives_up_on_the_issue_payload_within_the_budget():
    """Issue 19's repro: 800 lines of "x = 1" against 400 of "x = 1 / y = 2" after a header."""
    a = ("import torch\n" + "x = 1\n" * 800).splitlines()
    b = ("import torch\n" + "x = 1\ny = 2\n" * 400).splitlines()
    result = diff_lines(a, b, max_steps=100_000)
    assert result.opcodes is None and result.steps <= 100_000 + 2 * (len(a) + len(b))


def test_it_groups_changes_with_context_like_difflib():
    a = [f"line {i}" for i in range(30)]
    b = a[:5] + ["new"] + a[6:25] + a[26:]
    ours = grouped(diff_lines(a, b, 10_000).opcodes, 3)
    theirs = list(difflib.SequenceMatcher(None, a, b, autojunk=False).get_grouped_opcodes(3))
    assert ours == theirs
    assert grouped(diff_lines(a, a, 10_000).opcodes, 3) == []
