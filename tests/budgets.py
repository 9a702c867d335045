"""Work budgets measured as operation counts, not wall time (issue 19): how many Python lines a
call executes, stopped as soon as it passes its budget, so a test of a cubic path fails fast
instead of running for minutes."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any


class OverBudget(AssertionError):
    pass


def within_lines(call: Callable[[], Any], budget: int) -> tuple[Any, int]:
    """(what `call` returns, the Python lines it executed); OverBudget once it passes `budget` lines.
    Work done in C (a builtin's loop) is not counted: test that with counting objects instead."""
    executed = 0

    def on_line(frame, event, arg):
        nonlocal executed
        if event == "line":
            executed += 1
            if executed > budget:
                raise OverBudget(f"more than {budget} Python lines executed")
        return on_line

    previous = sys.gettrace()
    sys.settrace(lambda frame, event, arg: on_line)
    try:
        result = call()
    finally:
        sys.settrace(previous)
    return result, executed
