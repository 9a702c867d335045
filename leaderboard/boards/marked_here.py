"""What the current transaction has marked for the boards' re-scorer already (per thread: a
transaction belongs to one), so that a write marks each run and problem once per transaction and a
re-scoring in the same transaction lets a later write mark its runs again. Shared by the marks
(leaderboard/boards/marks.py) and the re-scoring (leaderboard/boards/rescoring.py)."""

from __future__ import annotations

import threading

local = threading.local()


def forget_marked(run_ids: list[int]) -> None:
    """These runs were re-scored in the current transaction: a later write in it marks them again."""
    marked = getattr(local, "marked", None)
    if marked is None:
        return
    ids = set(run_ids)
    stale = {place for place in marked[0] if (place[0] if isinstance(place, tuple) else place) in ids}
    marked[0].difference_update(stale)
