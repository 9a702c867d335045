"""What the overview shows beyond the boards: the benchmark as the almanac describes it (dates,
the authors' words, version notes), the counts, and the compact cut of the reported scores.

The authors' words are quoted from KernelBench's README (github.com/ScalingIntelligence/KernelBench,
commit 423217d); this site cannot fetch the paper's abstract (arXiv 2502.10517, CC0), so the
README's own description stands in for it, attributed as such.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Count, F, Q

from leaderboard.boards.stored import ALL_LEVELS, runs_measured_here
from leaderboard.models import LaunchPost, ReportedScore, RunScore

RELEASED = "December 2024 (paper February 2025)"
AUTHORS = "Stanford's Scaling Intelligence Lab"
PAPER_URL = "https://arxiv.org/abs/2502.10517"
REPOSITORY_URL = "https://github.com/ScalingIntelligence/KernelBench"
AUTHORS_WORDS = (
    "A benchmark and environment for evaluating LLMs' ability to generate efficient GPU kernels. "
    "Specifically we task LLM to generate correct and efficient CUDA / DSL kernels for PyTorch "
    "programs on a target GPU."
)
AUTHORS_WORDS_SOURCE = "KernelBench's README (the paper's abstract is at arXiv 2502.10517)"


@dataclass(frozen=True)
class VersionNote:
    version: str
    date: str
    text: str


VERSION_NOTES = (
    VersionNote(
        "KernelBench v0",
        "December 2024",
        "250 PyTorch problems in three levels: 100 single operators, 100 fused operator sequences, "
        "50 whole architectures; scored by fast_p.",
    ),
    VersionNote(
        "KernelBench v0.1",
        "July 2025",
        "Fixed problem sizes and numerics, randomised correctness tests, and level 4 (whole Hugging Face models).",
    ),
)


ALMANAC = {
    "released": RELEASED,
    "authors": AUTHORS,
    "paper_url": PAPER_URL,
    "repository_url": REPOSITORY_URL,
    "authors_words": AUTHORS_WORDS,
    "authors_words_source": AUTHORS_WORDS_SOURCE,
    "version_notes": VERSION_NOTES,
}


@dataclass(frozen=True)
class Counts:
    models_reported: int  # models with a score in a lab card, paper or post
    reported_scores: int
    posts_listing: int  # launch posts that list KernelBench
    labs_listing: int  # ... from this many labs
    runs_measured: int  # runs with kernels measured here (board.store.measured_here; demo data left out)
    models_measured: int
    runs_fully_measured: int  # ... of which every kernel is measured here (what the strongest card ranks)


def counts() -> Counts:
    """The overview's counts, in three queries."""
    reported = ReportedScore.objects.aggregate(n=Count("pk"), models=Count("model", distinct=True))
    posts = LaunchPost.objects.filter(lists_kernelbench=True, is_demo=False).aggregate(
        n=Count("pk"), labs=Count("lab", distinct=True)
    )
    # The runs verified here, whatever their origin: the one count of "measured here" (board.store).
    fully = RunScore.objects.filter(level=ALL_LEVELS, with_excluded=True, measured__gte=F("kernels"))
    runs = runs_measured_here().aggregate(
        n=Count("pk"), models=Count("model", distinct=True), fully=Count("pk", filter=Q(pk__in=fully.values("run_id")))
    )
    return Counts(
        reported["models"], reported["n"], posts["n"], posts["labs"], runs["n"], runs["models"], runs["fully"]
    )
