"""kbl's two kinds of failure: the user's input, and the site's reply."""


class UsageError(Exception):
    """Bad input from the user (a file that is not there, a folder with no kernels)."""


class ApiError(Exception):
    """A request that failed: the site's own message when it sent one."""

    def __init__(self, message: str, status: int = 0):
        super().__init__(message)
        self.status = status
