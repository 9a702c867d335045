from django.apps import AppConfig


class LeaderboardConfig(AppConfig):
    name = "leaderboard"
    verbose_name = "Leaderboard"

    def ready(self) -> None:
        from config import checks  # noqa: F401  (registers the system checks; deferred until the app registry is ready)
        from leaderboard.boards import signals  # noqa: F401  (keeps the boards' read model current; deferred likewise)
        from leaderboard.ops import sign_in_limit  # noqa: F401  (counts failed sign-ins; deferred likewise)
        from leaderboard.reads.board import featured_signals  # noqa: F401  (keeps the featured set current; deferred likewise)
