"""kbl's two kinds of failure: the user's input, and the site's reply."""

from __future__ import annotations


class UsageError(Exception):
    """Bad input from the user (a file that is not there, a folder with no kernels)."""


class ApiError(Exception):
    """A request that failed: the site's own message when it sent one. `lines` are the site's
    errors one a line, each starting `field: ` when it is about one field of the request; `render`
    names that field by the command's flag instead (`--set`, not the API's `problem_set`)."""

    def __init__(self, message: str, status: int = 0, lines: list[str] | None = None):
        super().__init__(message)
        self.status = status
        self.lines = lines or []

    def render(self, flags: dict[str, str]) -> str:
        if not self.lines:
            return str(self)
        return "\n  ".join([str(self), *(_flagged(line, flags) for line in self.lines)])


def _flagged(line: str, flags: dict[str, str]) -> str:
    field, sep, rest = line.partition(": ")
    return f"{flags[field]}: {rest}" if sep and field in flags else line
