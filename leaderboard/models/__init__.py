"""Labs, models, runs, kernels, evaluations, reported scores, launch posts and reviews: one module
per concern, every name importable from here as before."""

from leaderboard.models.boards import (
    BoardVersion,
    DirtyProblem,
    DirtyRun,
    ProblemStats,
    RunScore,
)
from leaderboard.models.kernels import (
    EXCLUDING_VERDICTS,
    FASTEST,
    RANKED,
    REVIEW_NOTE_CODES,
    Evaluation,
    ImmutableSourceError,
    Kernel,
    KernelQuerySet,
    KernelReport,
    PublishedFigure,
    Review,
    code_q,
    guess_backend,
    utf8_size,
)
from leaderboard.models.names import (
    Lab,
    LanguageModel,
    ModelAlias,
    ModelMerge,
    alias_key,
)
from leaderboard.models.reported import (
    LaunchPost,
    ReportedScore,
)
from leaderboard.models.runs import (
    WRITE_ANY_RUN,
    Origin,
    Precision,
    Run,
    RunQuerySet,
)

__all__ = [
    "BoardVersion",
    "DirtyProblem",
    "DirtyRun",
    "EXCLUDING_VERDICTS",
    "Evaluation",
    "FASTEST",
    "ImmutableSourceError",
    "Kernel",
    "KernelQuerySet",
    "KernelReport",
    "Lab",
    "LanguageModel",
    "LaunchPost",
    "ModelAlias",
    "ModelMerge",
    "Origin",
    "Precision",
    "ProblemStats",
    "PublishedFigure",
    "RANKED",
    "REVIEW_NOTE_CODES",
    "ReportedScore",
    "Review",
    "Run",
    "RunQuerySet",
    "RunScore",
    "WRITE_ANY_RUN",
    "alias_key",
    "code_q",
    "guess_backend",
    "utf8_size",
]
