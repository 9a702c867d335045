"""The boards' read model, written by leaderboard/boards/: runs' stored aggregates, the
marks of runs and problems waiting for the re-scorer, the boards' versions, problems' kernel counts."""

from __future__ import annotations

from django.db import models
from django.db.models.functions import Now

from leaderboard.models.runs import Run
from problems.models import Problem, ProblemSet

# --- the boards' read model (written by leaderboard/boards/) ---------------------------


class RunScore(models.Model):
    """One run's aggregate on one level (level 0: all levels), counting reviewers' exclusions or not.

    Everything a board row needs without touching evaluations: per rule (KernelBench's sample 0,
    best-of-n) the problem counts and the sorted speedups of scored problems (packed float64), so
    fast_p at any p is a binary search; review counts; per-problem outcomes for run pages."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="scores")
    level = models.PositiveSmallIntegerField(help_text="1-4, or 0 for all levels together.")
    with_excluded = models.BooleanField(default=False, help_text="Counts kernels reviewers excluded.")
    kernels = models.PositiveIntegerField(default=0)
    flagged = models.PositiveIntegerField(default=0)
    unreviewed = models.PositiveIntegerField(default=0)
    excluded = models.PositiveIntegerField(default=0)
    s0_attempted = models.PositiveIntegerField(default=0)
    s0_compiled = models.PositiveIntegerField(default=0)
    s0_correct = models.PositiveIntegerField(default=0)
    s0_unscored = models.PositiveIntegerField(default=0)
    s0_log_sum = models.FloatField(default=0.0)
    s0_speedups = models.BinaryField(default=b"")
    best_attempted = models.PositiveIntegerField(default=0)
    best_compiled = models.PositiveIntegerField(default=0)
    best_correct = models.PositiveIntegerField(default=0)
    best_unscored = models.PositiveIntegerField(default=0)
    best_log_sum = models.FloatField(default=0.0)
    best_speedups = models.BinaryField(default=b"")
    pass_at_1_sum = models.FloatField(default=0.0)
    # Kernels whose latest evaluation was measured here: > 0 means the run is verified here
    # (leaderboard.boards.stored.measured_here is the one place that reads it so).
    measured = models.PositiveIntegerField(default=0)
    # Published figures (Kernel.published_speedup), apart from the measured ones: problems with one,
    # their sorted best published speedups (packed float64), and the hardware they were timed on.
    pub_count = models.PositiveIntegerField(default=0)
    pub_log_sum = models.FloatField(default=0.0)
    pub_speedups = models.BinaryField(default=b"")
    pub_hardware = models.CharField(max_length=60, blank=True, default="")
    # {problem id: its entry}: sample-0 status code, sample-0 speedup, best speedup, kernels, and the
    # rest the row is folded from (scoring.problem_entry, scoring.STATUS_CODES)
    problems = models.JSONField(default=dict)
    # fast_p's count at each standard p (scoring.STANDARD_PS), of each rule and of the published
    # figures: what a board ranks by and names its leaders by, as plain columns, so that the database
    # ranks a board's rows and only the shown page's are read and made (leaderboard/reads/board/ranked.py).
    # Derived from the sorted speedups above when the row is written (stored.above_counts).
    s0_above_0_5 = models.PositiveIntegerField(default=0)
    s0_above_0_8 = models.PositiveIntegerField(default=0)
    s0_above_1 = models.PositiveIntegerField(default=0)
    s0_above_1_5 = models.PositiveIntegerField(default=0)
    s0_above_2 = models.PositiveIntegerField(default=0)
    best_above_0_5 = models.PositiveIntegerField(default=0)
    best_above_0_8 = models.PositiveIntegerField(default=0)
    best_above_1 = models.PositiveIntegerField(default=0)
    best_above_1_5 = models.PositiveIntegerField(default=0)
    best_above_2 = models.PositiveIntegerField(default=0)
    pub_above_0_5 = models.PositiveIntegerField(default=0)
    pub_above_0_8 = models.PositiveIntegerField(default=0)
    pub_above_1 = models.PositiveIntegerField(default=0)
    pub_above_1_5 = models.PositiveIntegerField(default=0)
    pub_above_2 = models.PositiveIntegerField(default=0)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["run", "level", "with_excluded"], name="runscore_unique"),
        ]
        # What a board ranked by the database reads of each run's row on its level (ranked.py): in
        # one index, so that ranking the 50,000 rows of a level scans the index, not the rows' 1 GB
        # of speedups and entries (374 ms a query at 13 M by a scan of the table).
        indexes = [
            models.Index(
                fields=[
                    "level", "with_excluded", "run", "kernels", "measured", "pub_count", "s0_correct", "best_correct",
                    "s0_above_0_5", "s0_above_0_8", "s0_above_1", "s0_above_1_5", "s0_above_2",
                    "best_above_0_5", "best_above_0_8", "best_above_1", "best_above_1_5", "best_above_2",
                    "pub_above_0_5", "pub_above_0_8", "pub_above_1", "pub_above_1_5", "pub_above_2",
                ],
                name="runscore_rank_idx",
            ),
        ]  # fmt: skip

    def __str__(self) -> str:
        return f"scores of run {self.run_id}, level {self.level or 'all'}"


class BoardVersion(models.Model):
    """Bumped whenever a run of the problem set is re-scored: the boards' cache key and Last-Modified."""

    problem_set = models.OneToOneField(ProblemSet, on_delete=models.CASCADE, primary_key=True, related_name="+")
    version = models.BigIntegerField(default=0)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"boards of {self.problem_set_id}: version {self.version}"


class DirtyRun(models.Model):
    """A run whose stored scores may be stale: marked in the writing transaction, cleared when it is
    re-scored (by the background re-scorer in batches, or by a board build that finds it first)."""

    run_id = models.BigIntegerField(primary_key=True)
    # The oldest write not yet re-scored, by the database's clock (as every time of a mark): a
    # writer's host 10 minutes behind once made /healthz report its fresh mark 600 s old.
    marked_at = models.DateTimeField(db_default=Now())
    # The latest write that marked it: a re-scoring removes the mark only if no write marked it
    # again since it read the run's kernels, and writers never wait for a re-scoring to end.
    last_marked_at = models.DateTimeField(null=True, blank=True)
    # A run whose re-scoring failed is set aside (rescoring.refresh_runs): its last stored scores
    # stay on the boards, it is not retried on every read, /healthz says "degraded" and the admin
    # lists it with the error, until a write marks it again or rebuild_boards re-scores it.
    failed_at = models.DateTimeField(null=True, blank=True)
    error = models.TextField(blank=True)
    # Whether the whole run is re-scored (a review-free import, a run created or edited), or only
    # the problems its DirtyProblem rows name (a result, a review, a kernel added or deleted): a
    # write that knows its problem leaves this as it is, one that does not sets it.
    whole = models.BooleanField(default=True)

    def __str__(self) -> str:
        return f"run {self.run_id} to re-score"


class DirtyProblem(models.Model):
    """One problem of a marked run whose stored entry may be stale (a result, a review): the
    re-scorer reads only that problem's kernels and folds the run's levels again from the stored
    entries (leaderboard/boards/). Its DirtyRun row is the queue; these say what to do."""

    run_id = models.BigIntegerField()
    problem_id = models.BigIntegerField()
    # As DirtyRun.last_marked_at: a re-scoring removes the row only if no write renewed it since.
    last_marked_at = models.DateTimeField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["run_id", "problem_id"], name="dirtyproblem_unique")]

    def __str__(self) -> str:
        return f"problem {self.problem_id} of run {self.run_id} to re-score"


class ProblemStats(models.Model):
    """Stored per-problem counts: the problems list never counts 1.3 M kernels."""

    problem = models.OneToOneField(Problem, on_delete=models.CASCADE, primary_key=True, related_name="stats")
    n_kernels = models.PositiveIntegerField(default=0)

    class Meta:
        verbose_name = verbose_name_plural = "problem stats"  # not Django's "problem statss"

    def __str__(self) -> str:
        return f"problem {self.problem_id}: {self.n_kernels} kernels"
