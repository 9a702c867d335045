"""Labs, models, runs, kernels, evaluations, reported scores, launch posts, reviews, and the record
of who wrote what: one module per concern, every name importable from here as before."""

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
from leaderboard.models.records import Author, WriteRecord, acting_user, author_name
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
    "Author",
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
    "WriteRecord",
    "acting_user",
    "alias_key",
    "author_name",
    "code_q",
    "guess_backend",
    "utf8_size",
]
