"""What the client prints: a progress bar while waiting, the run's fast_p table at the end.

Text from the site (names, labels, messages) goes through printable() first: a model named with
terminal control sequences must not retitle the window, clear the screen or fake output.
"""

from __future__ import annotations

import sys
from typing import Any, TextIO

BAR_WIDTH = 30


def printable(text: object) -> str:
    """`text` with every character that is not printable (C0 and C1 controls, DEL, bidi overrides
    and other format characters, line and paragraph separators) written as a Python escape, so
    that it shows instead of acting. Spaces stay; newlines and tabs are escaped too: callers print
    server text one field at a time."""
    return "".join(ch if ch.isprintable() else ch.encode("unicode_escape").decode("ascii") for ch in str(text))


PS = ("fast_0", "fast_0.5", "fast_0.8", "fast_1", "fast_1.5", "fast_2")


def progress_bar(progress: dict[str, Any], stream: TextIO = sys.stderr) -> None:
    """One line, redrawn in place on a terminal (a new line each time otherwise)."""
    total = progress.get("total") or 0
    finished = progress.get("evaluated", 0) + progress.get("failed", 0)
    filled = round(BAR_WIDTH * finished / total) if total else BAR_WIDTH
    line = f"[{'#' * filled}{'.' * (BAR_WIDTH - filled)}] {printable(progress.get('label', ''))}"
    end = "" if stream.isatty() else "\n"
    stream.write(("\r" + line.ljust(100)) if stream.isatty() else line + end)
    stream.flush()


def percent(value: Any) -> str:
    return "–" if value is None else f"{value * 100:.1f}%"


def fast_p_table(scores: dict[str, Any]) -> str:
    """The run's scores per level, KernelBench's sample-0 rule first, best-of-n beneath."""
    run = scores["run"]
    fields = (run["model"], run["setting"], run["precision"], run["hardware"])
    lines = [f"run {run['id']}: " + " · ".join(printable(field) for field in fields)]
    lines.append(f"{'level':<7}{'rule':<11}{'problems':>9}" + "".join(f"{p:>10}" for p in PS) + f"{'geomean':>9}")
    for level in scores["levels"]:
        fast = level["fast_p"]
        geomean = level["geomean_speedup"]
        lines.append(
            f"{'L' + str(level['level']):<7}{'sample 0':<11}{level['n_problems']:>9}"
            + "".join(f"{percent(fast.get(p)):>10}" for p in PS)
            + f"{'–' if geomean is None else f'{geomean:.2f}x':>9}"
        )
        if level.get("best_of_n"):
            best = level["best_of_n"]
            lines.append(f"{'':<7}{'best-of-n':<11}{'':>9}" + "".join(f"{percent(best.get(p)):>10}" for p in PS))
        if level.get("unscored"):
            lines.append(f"{'':<7}{level['unscored']} correct without a baseline (unscored above fast_0)")
    return "\n".join(lines)
