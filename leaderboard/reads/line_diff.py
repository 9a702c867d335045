"""A line diff whose work is bounded: Myers' O((N+M)·D) greedy algorithm, kept to the diagonals
that meet the grid, with a budget of steps.

difflib.SequenceMatcher is cubic on repetitive inputs (two 800-line kernels took 20.9 s, and
anonymous visitors can ask for any pair), so pages diff with this instead. Every unit of work is
counted as a step: one comparison of two lines while trimming the common ends or following a
diagonal, one diagonal visited, one entry of the path kept for the way back. When the steps would
pass the budget the diff gives up and says so (`LineDiff.opcodes is None`), and the page shows both
sources instead. Whatever the inputs, a diff costs at most `max_steps` plus one round's bookkeeping
or one diagonal's run, plus the walk back and the trimming, each under len(a) + len(b): the bound
the property tests check.

Opcodes have difflib's shape, (tag, i1, i2, j1, j2) with tag "equal", "replace", "delete" or
"insert", so the rest of the page code reads them the same way.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

Opcode = tuple[str, int, int, int, int]


@dataclass(frozen=True)
class LineDiff:
    opcodes: list[Opcode] | None  # None: the budget ran out before the shortest edit was found
    steps: int  # the work done, in the module docstring's steps


def _interned(a: Sequence[str], b: Sequence[str]) -> tuple[list[int], list[int]]:
    """Each line as a small int (equal lines, equal ints), so comparing two lines costs the same
    whatever their length."""
    ids: dict[str, int] = {}
    return [ids.setdefault(line, len(ids)) for line in a], [ids.setdefault(line, len(ids)) for line in b]


def _common_ends(a: list[int], b: list[int]) -> tuple[int, int]:
    """How many lines a and b share at their start, and then at their end."""
    shortest = min(len(a), len(b))
    head = 0
    while head < shortest and a[head] == b[head]:
        head += 1
    tail = 0
    while tail < shortest - head and a[-1 - tail] == b[-1 - tail]:
        tail += 1
    return head, tail


def _band(d: int, n: int, m: int) -> tuple[int, int]:
    """The diagonals k = x - y that round d visits: those of d's parity from -d to d, and only
    those that meet the grid (-m <= k <= n). Keeping to the grid halves the work of a short source
    against a long one (a kernel against its reference: mostly insertions)."""
    if d < 0:
        return 1, 0  # before the first round: none
    low = -d if d <= m else -m + (d - m) % 2
    high = d if d <= n else n - (d - n) % 2
    return low, high


def _down(k: int, furthest: list[int], offset: int, previous: tuple[int, int]) -> bool:
    """Whether diagonal k is best reached from k + 1 (down: an insertion from b) rather than from
    k - 1 (right: a deletion from a), among the diagonals the previous round reached."""
    low, high = previous
    if k + 1 > high:
        return False
    return k - 1 < low or furthest[offset + k - 1] < furthest[offset + k + 1]


def _forward(a: list[int], b: list[int], max_steps: int) -> tuple[list[tuple[int, list[int]]] | None, int]:
    """Myers' greedy forward pass. Returns (for each round, the first diagonal kept and the furthest
    x on the diagonals it reads, kept for the way back; None when the budget ran out) and the steps."""
    n, m = len(a), len(b)
    offset = n + m + 2
    furthest = [0] * (2 * offset + 1)  # furthest[offset + k]: furthest x on diagonal k = x - y
    trace: list[tuple[int, list[int]]] = []
    steps = 0
    for d in range(n + m + 1):
        low, high = _band(d, n, m)
        trace.append((low - 1, furthest[offset + low - 1 : offset + high + 2]))
        steps += high - low + 3
        if steps > max_steps:  # a round is never walked on a spent budget, nor one whose copy spent it
            return None, steps
        previous = _band(d - 1, n, m)
        for k in range(low, high + 1, 2):
            if d == 0:
                x = 0
            elif _down(k, furthest, offset, previous):
                x = furthest[offset + k + 1]
            else:
                x = furthest[offset + k - 1] + 1
            y = x - k
            start = x
            while x < n and y < m and a[x] == b[y]:
                x, y = x + 1, y + 1
            steps += 1 + x - start
            furthest[offset + k] = x
            if x >= n and y >= m:
                return trace, steps
            if steps > max_steps:
                return None, steps
    raise AssertionError("unreachable: d = n + m always reaches the end")


def _moves(trace: list[tuple[int, list[int]]], n: int, m: int) -> list[tuple[int, int, int, int]]:
    """The shortest edit as moves (x0, y0, x1, y1) from (0, 0) to (n, m), walked back from the end."""
    moves: list[tuple[int, int, int, int]] = []
    x, y = n, m
    for d in range(len(trace) - 1, 0, -1):
        first, kept = trace[d]  # kept[k - first]: the furthest x on diagonal k before round d
        k, offset = x - y, -first
        previous_k = k + 1 if _down(k, kept, offset, _band(d - 1, n, m)) else k - 1
        previous_x = kept[offset + previous_k]
        previous_y = previous_x - previous_k
        while x > previous_x and y > previous_y:
            moves.append((x - 1, y - 1, x, y))
            x, y = x - 1, y - 1
        moves.append((previous_x, previous_y, x, y))
        x, y = previous_x, previous_y
    while x > 0 and y > 0:  # round 0: the common start, a diagonal from (0, 0)
        moves.append((x - 1, y - 1, x, y))
        x, y = x - 1, y - 1
    moves.reverse()
    return moves


def _opcodes(moves: list[tuple[int, int, int, int]], head: int, tail: int, n: int, m: int) -> list[Opcode]:
    """difflib-style opcodes from moves over the middle (a[head:n-tail] against b[head:m-tail]),
    with the common start and end added back; a deletion next to an insertion is one "replace"."""
    codes: list[Opcode] = []

    def add(equal: bool, i1: int, i2: int, j1: int, j2: int) -> None:
        if codes and (codes[-1][0] == "equal") == equal:
            _tag, i1, _i2, j1, _j2 = codes.pop()
        tag = "equal" if equal else "replace" if i1 < i2 and j1 < j2 else "delete" if i1 < i2 else "insert"
        codes.append((tag, i1, i2, j1, j2))

    if head:
        add(True, 0, head, 0, head)
    for x0, y0, x1, y1 in moves:
        add(x1 - x0 == 1 and y1 - y0 == 1, head + x0, head + x1, head + y0, head + y1)
    if tail:
        add(True, n - tail, n, m - tail, m)
    return codes


def diff_lines(a: Sequence[str], b: Sequence[str], max_steps: int) -> LineDiff:
    """The shortest line edit of a -> b as difflib opcodes, or None (opcodes) when finding it would
    take more than about `max_steps` steps."""
    left, right = _interned(a, b)
    head, tail = _common_ends(left, right)
    steps = head + tail + 2
    middle_a, middle_b = left[head : len(left) - tail], right[head : len(right) - tail]
    if not middle_a and not middle_b:
        return LineDiff(_opcodes([], head, tail, len(a), len(b)) if a else [], steps)
    trace, spent = _forward(middle_a, middle_b, max_steps)
    if trace is None:
        return LineDiff(None, steps + spent)
    moves = _moves(trace, len(middle_a), len(middle_b))
    return LineDiff(_opcodes(moves, head, tail, len(a), len(b)), steps + spent + len(moves))


def grouped(opcodes: list[Opcode], context: int) -> list[list[Opcode]]:
    """The changes with `context` lines around each, as hunks: difflib's get_grouped_opcodes."""
    codes = list(opcodes) or [("equal", 0, 1, 0, 1)]
    if codes[0][0] == "equal":
        tag, i1, i2, j1, j2 = codes[0]
        codes[0] = tag, max(i1, i2 - context), i2, max(j1, j2 - context), j2
    if codes[-1][0] == "equal":
        tag, i1, i2, j1, j2 = codes[-1]
        codes[-1] = tag, i1, min(i2, i1 + context), j1, min(j2, j1 + context)
    groups: list[list[Opcode]] = []
    group: list[Opcode] = []
    for tag, i1, i2, j1, j2 in codes:
        if tag == "equal" and i2 - i1 > 2 * context:
            group.append((tag, i1, i1 + context, j1, j1 + context))
            groups.append(group)
            group = []
            i1, j1 = max(i1, i2 - context), max(j1, j2 - context)
        group.append((tag, i1, i2, j1, j2))
    if group and not (len(group) == 1 and group[0][0] == "equal"):
        groups.append(group)
    return groups
