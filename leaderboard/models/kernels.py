"""Kernels, their evaluations and published figures, reviewers' verdicts and reports on them, and the
review rules as query expressions (read by KernelQuerySet.with_review_state)."""

from __future__ import annotations

import datetime as dt

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import BooleanField, Case, DateTimeField, F, FloatField, OuterRef, Q, Subquery, Value, When
from django.db.models.functions import Cast, Coalesce
from django.urls import reverse

from evaluation.results.metrics import MAX_SPEEDUP
from leaderboard.models.runs import Origin, Run
from problems.models import DB_INT_MAX, Hardware, Problem, ScoringRules, source_sha256


class KernelQuerySet(models.QuerySet):
    """Kernels, with the review state that the queue, the kernel page and the standings read.

    The rules (what is flagged, excluded, in need of review) are written out in
    leaderboard/reviews/services.py; the expressions that implement them are at the end of this module.
    """

    def with_review_state(self) -> KernelQuerySet:
        """Annotate latest_verdict, latest_review_at, latest_report_at and the booleans is_flagged,
        is_reported, is_high_imported, is_high_published, is_excluded and needs_review (all in the one query; the rules
        are spelled out in leaderboard/reviews/services.py). Only positive conditions (no
        negation), so that NULLs (no review, no evaluation) read as false on every database."""
        reviews = Review.objects.filter(kernel=OuterRef("pk")).order_by("-created_at", "-pk")
        reports = KernelReport.objects.filter(kernel=OuterRef("pk")).order_by("-created_at", "-pk")
        return self.annotate(
            latest_verdict=Subquery(reviews.values("verdict")[:1]),
            latest_review_at=Subquery(reviews.values("created_at")[:1]),
            latest_report_at=Subquery(reports.values("created_at")[:1]),
        ).with_review_rules()

    def never_reviewed_or_reported(self) -> KernelQuerySet:
        """with_review_state for kernels without a review or a report, without its correlated
        subqueries (which find nothing for them): a whole rebuild states millions of kernels, and
        all but a few thousand are of this kind."""
        none_at = Cast(Value(None), output_field=DateTimeField())  # typed: a bare NULL reads as text
        return (
            self.exclude(pk__in=Review.objects.values("kernel_id"))
            .exclude(pk__in=KernelReport.objects.values("kernel_id"))
            .annotate(
                latest_verdict=Cast(Value(None), output_field=models.CharField()),
                latest_review_at=none_at,
                latest_report_at=none_at,
            )
            .with_review_rules()
        )

    def with_review_rules(self) -> KernelQuerySet:
        """The review rules over annotations latest_verdict, latest_review_at and latest_report_at
        (with_review_state's subqueries, or constants where they are known)."""
        kernels = self.annotate(evaluated_at=Coalesce("latest_evaluation__finished_at", "latest_evaluation__queued_at"))
        # "Never reviewed" reads as reviewed at the epoch, so each rule needs one comparison (and the
        # SQL holds each correlated subquery fewer times).
        reviewed_at = Coalesce("latest_review_at", Value(EPOCH, output_field=DateTimeField()))
        reported = Q(latest_report_at__gt=reviewed_at)
        high_imported = Q(
            latest_evaluation__origin=Origin.IMPORTED, latest_evaluation__speedup__gt=settings.REVIEW_SPEEDUP_THRESHOLD
        )
        no_verdict_since_evaluation = Q(evaluated_at__gt=reviewed_at)
        # A published claim above the flag threshold: reviewed once as a claim, again once measured.
        high_published = Q(published_speedup__gt=settings.REVIEW_PUBLISHED_SPEEDUP_THRESHOLD)
        return kernels.annotate(
            is_flagged=_flag(flagged_q()),
            is_reported=_flag(reported),
            is_high_imported=_flag(high_imported),
            is_high_published=_flag(high_published),
            is_excluded=_flag(Q(latest_verdict__in=EXCLUDING_VERDICTS)),
            needs_review=_flag(
                reported
                | ((flagged_q() | high_imported) & no_verdict_since_evaluation)
                | (high_published & (Q(latest_review_at__isnull=True) | no_verdict_since_evaluation))
            ),
        )

    def needing_review(self) -> KernelQuerySet:
        """Kernels the review queue lists: suspicious, with no verdict since (see reviews.py).
        Selected by the stored state (partial index kernel_review_queue_idx), then annotated."""
        return self.filter(review_pending=True).with_review_state()

    def excluded(self) -> KernelQuerySet:
        """Kernels whose latest verdict is reward hack or invalid: out of fast_p and rankings."""
        return self.filter(review_excluded=True)

    def counted(self) -> KernelQuerySet:
        """Kernels that count in rankings: every kernel but the excluded ones."""
        return self.filter(review_excluded=False)

    # A stored kernel's source never changes (new source, new kernel): the bulk paths refuse it too.
    def update(self, **kwargs) -> int:
        _refuse_source_write(kwargs)
        return super().update(**kwargs)

    def bulk_update(self, objs, fields, batch_size=None) -> int:
        _refuse_source_write(fields)
        return super().bulk_update(objs, fields, batch_size=batch_size)


class ImmutableSourceError(ValueError):
    """Raised on any attempt to change a stored kernel's source: new source, new kernel."""


IMMUTABLE_KERNEL_FIELDS = frozenset({"source", "source_hash", "source_bytes"})


def _refuse_source_write(fields) -> None:
    written = IMMUTABLE_KERNEL_FIELDS.intersection(fields)
    if written:
        raise ImmutableSourceError(
            f"a stored kernel's {', '.join(sorted(written))} never changes: store a new kernel instead"
        )


# Fastest first, kernels without a speedup last (speedups are > 0), in a form SQLite can index too.
FASTEST = Coalesce(F("latest_speedup"), Value(0.0, output_field=FloatField())).desc()
# By the speedup a kernel ranks by: measured here, else imported, else published (Kernel.ranked_speedup).
RANKED = Coalesce(F("ranked_speedup"), Value(0.0, output_field=FloatField())).desc()


class Kernel(models.Model):
    """One generated solution (`class ModelNew`) to one problem."""

    class Backend(models.TextChoices):
        CUDA = "cuda", "CUDA"
        TRITON = "triton", "Triton"
        CPP = "cpp", "C++"
        TORCH = "torch", "PyTorch only"
        OTHER = "other", "other"

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="kernels")
    problem = models.ForeignKey(Problem, on_delete=models.PROTECT, related_name="kernels")
    sample_index = models.PositiveIntegerField(default=0, validators=[MaxValueValidator(DB_INT_MAX)])
    source = models.TextField()
    source_hash = models.CharField(max_length=64, editable=False, db_index=True)
    backend = models.CharField(max_length=10, choices=Backend.choices, default=Backend.OTHER)
    # The evaluation that pages and rankings use: the newest finished one, kept by the worker.
    latest_evaluation = models.ForeignKey(
        "Evaluation", on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    submitted_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="kernels"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    # The review state, stored (the rules: leaderboard/reviews/services.py; computed by
    # with_review_state, written by leaderboard/boards/ after every write that changes it).
    review_verdict = models.CharField(max_length=12, blank=True, editable=False)
    review_pending = models.BooleanField(default=False, editable=False, help_text="Awaits review.")
    review_excluded = models.BooleanField(default=False, editable=False)
    review_flagged = models.BooleanField(default=False, editable=False)
    # When it joined the review queue (its newest report, else its latest evaluation, else its
    # creation): the queue's default order, from the partial index below.
    review_queued_at = models.DateTimeField(null=True, blank=True, editable=False)
    # The latest evaluation's speedup, stored beside the review state: the problem and kernel
    # pages sort a problem's thousands of kernels by it from an index, not through a join.
    latest_speedup = models.FloatField(null=True, blank=True, editable=False)
    # The source's size in UTF-8 bytes: what the per-user storage quota sums (leaderboard/quotas.py).
    source_bytes = models.PositiveIntegerField(default=0, editable=False)
    # A figure someone else published for this kernel (KernelBench's leaderboard: its speedup over
    # PyTorch eager on their GPU), kept beside ours and never mixed with it: no fast_p, ranking or
    # stored score reads it; pages show it apart, labelled "published, <published_hardware>".
    published_speedup = models.FloatField(
        null=True, blank=True, validators=[MinValueValidator(0.0), MaxValueValidator(MAX_SPEEDUP)]
    )
    published_hardware = models.CharField(max_length=60, blank=True, help_text="Where the published figure was timed.")
    # Stored by the read model: the speedup the problem page and the grid rank the kernel by: its
    # latest evaluation's when that was measured here (None when it failed here), else its latest
    # evaluation's, else the published figure (leaderboard/boards/).
    ranked_speedup = models.FloatField(null=True, blank=True, editable=False)
    # Where the source is public, for a kernel stored without it (source "" and the hash of the
    # public file: seed_demo's field figures, whose code is not ours to redistribute). Importing the
    # file later fills the source in: the one write of a source allowed, since its hash is the stored one.
    source_url = models.URLField(max_length=500, blank=True, help_text="The source's public location.")

    objects = KernelQuerySet.as_manager()

    class Meta:
        ordering = ["problem", "sample_index"]
        constraints = [
            models.UniqueConstraint(fields=["run", "problem", "sample_index"], name="kernel_unique_sample"),
            models.CheckConstraint(
                condition=models.Q(published_speedup__isnull=True) | models.Q(published_speedup__gt=0),
                name="kernel_published_speedup_positive",
            ),
            # No infinite (or absurd) speedup is stored, whatever way it came in: one took every board down.
            models.CheckConstraint(
                condition=models.Q(published_speedup__isnull=True) | models.Q(published_speedup__lte=MAX_SPEEDUP),
                name="kernel_published_speedup_under_ceiling",
            ),
            models.CheckConstraint(
                condition=models.Q(latest_speedup__isnull=True) | models.Q(latest_speedup__lte=MAX_SPEEDUP),
                name="kernel_latest_speedup_under_ceiling",
            ),
        ]
        indexes = [
            # Problem page: every kernel of one problem.
            models.Index(fields=["problem", "run"], name="kernel_problem_idx"),
            # Review queue (KernelQuerySet.needing_review): the few kernels that await review.
            models.Index(
                fields=["-review_queued_at", "-id"], condition=Q(review_pending=True), name="kernel_review_queue_idx"
            ),
            # The queue by speedup has two partial indexes on PostgreSQL alone (migration 0033):
            # SQLite cannot put NULLS LAST in an index.
            # Problem page (kernels ranked, counted ones first) and kernel page (fastest siblings).
            models.Index(F("problem"), F("review_excluded"), FASTEST, name="kernel_problem_ranked_idx"),
            models.Index(F("problem"), FASTEST, name="kernel_fastest_idx"),
            # Problem page and the level grid: kernels by the speedup they rank by, measured or published.
            models.Index(F("problem"), F("review_excluded"), RANKED, name="kernel_problem_rank_idx"),
        ]

    def __str__(self) -> str:
        return f"kernel {self.pk}: {self.problem} sample {self.sample_index}"

    @classmethod
    def from_db(cls, db, field_names, values):
        kernel = super().from_db(db, field_names, values)
        # What save() compares against: the hash of the source as stored.
        kernel._stored_source_hash = kernel.__dict__.get("source_hash")
        return kernel

    def save(self, *args, **kwargs) -> None:
        """Saves the kernel; ImmutableSourceError when the row exists and its source would change."""
        update_fields = kwargs.get("update_fields")
        writes_source = "source" in self.__dict__ and (
            update_fields is None or IMMUTABLE_KERNEL_FIELDS.intersection(update_fields)
        )
        if writes_source and self.source == "" and self.source_hash:
            self._check_withheld()  # stored without its source (source_url says where): the given hash stands
        elif writes_source:
            new_hash = source_sha256(self.source)
            stored = self._stored_hash()
            if stored is not None and stored != new_hash:
                raise ImmutableSourceError(f"kernel {self.pk}'s source never changes: store a new kernel instead")
            self.source_hash = new_hash
            self.source_bytes = utf8_size(self.source)
        if self.backend == self.Backend.OTHER and "source" in self.__dict__:
            self.backend = guess_backend(self.source)
        super().save(*args, **kwargs)
        self._stored_source_hash = self.source_hash

    def _check_withheld(self) -> None:
        """A kernel stored without its source keeps the hash it was given; a stored source is never
        emptied and a stored hash never changes (ImmutableSourceError)."""
        stored = self._stored_hash()
        if stored is not None and (
            stored != self.source_hash or Kernel.objects.filter(pk=self.pk, source_bytes__gt=0).exists()
        ):
            raise ImmutableSourceError(f"kernel {self.pk}'s source never changes: store a new kernel instead")
        self.source_bytes = 0

    def _stored_hash(self) -> str | None:
        """The stored row's source hash; None for a kernel not stored yet."""
        if self.pk is None:
            return None
        if not self._state.adding and getattr(self, "_stored_source_hash", None):
            return self._stored_source_hash
        return Kernel.objects.filter(pk=self.pk).values_list("source_hash", flat=True).first()

    def get_absolute_url(self) -> str:
        return reverse("kernel-detail", args=[self.pk])

    @property
    def source_withheld(self) -> bool:
        """Stored without its source: only its hash and where it is public (source_url)."""
        return self.source == "" and bool(self.source_hash)

    @property
    def published_label(self) -> str:
        return published_label(self.published_hardware)


def published_label(hardware: str) -> str:
    """How a published figure is labelled wherever it is shown: "published, L40S"."""
    return f"published, {hardware}" if hardware else "published"


def utf8_size(source: str) -> int:
    return len(source.encode("utf-8", errors="surrogatepass"))


def guess_backend(source: str) -> str:
    """Which backend a kernel's source uses, from the markers each one needs."""
    if "import triton" in source or "@triton.jit" in source:
        return Kernel.Backend.TRITON
    if "load_inline" in source or "cpp_extension" in source:
        return Kernel.Backend.CUDA if ("__global__" in source or "cuda_sources" in source) else Kernel.Backend.CPP
    return Kernel.Backend.TORCH


class PublishedFigure(models.Model):
    """What someone else measured for one kernel on their GPU (KernelBench's original leaderboard:
    correct, speedups over eager and torch.compile, runtimes, on an L40S), kept beside the
    Evaluations measured here and never inside them: no fast_p or stored score counts it. Its
    hardware is the GPU it was timed on, never the hardware that re-measures it here.
    Kernel.published_speedup / published_hardware keep the eager speedup denormalised."""

    kernel = models.ForeignKey(Kernel, on_delete=models.CASCADE, related_name="published_figures")
    hardware = models.ForeignKey(Hardware, on_delete=models.PROTECT, related_name="published_figures")
    correct = models.BooleanField(null=True, blank=True)
    speedup_eager = models.FloatField(null=True, blank=True, help_text="Over PyTorch eager.")
    speedup_compile = models.FloatField(null=True, blank=True, help_text="Over torch.compile.")
    runtime_ms = models.FloatField(null=True, blank=True, help_text="The kernel's time.")
    reference_eager_ms = models.FloatField(null=True, blank=True)
    reference_compile_ms = models.FloatField(null=True, blank=True)
    ranked_by_source = models.BooleanField(default=False, help_text="The source's own ranking shows it (its top 5).")
    source = models.CharField(max_length=200, help_text="Who published it.")
    source_url = models.URLField(max_length=500)
    recorded_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["kernel", "hardware"]
        constraints = [
            models.UniqueConstraint(fields=["kernel", "hardware", "source_url"], name="publishedfigure_unique"),
            models.CheckConstraint(
                condition=(models.Q(speedup_eager__isnull=True) | models.Q(speedup_eager__gt=0))
                & (models.Q(speedup_compile__isnull=True) | models.Q(speedup_compile__gt=0)),
                name="publishedfigure_speedups_positive",
            ),
            models.CheckConstraint(  # no infinite (or absurd) speedup, whatever way it came in
                condition=(models.Q(speedup_eager__isnull=True) | models.Q(speedup_eager__lte=MAX_SPEEDUP))
                & (models.Q(speedup_compile__isnull=True) | models.Q(speedup_compile__lte=MAX_SPEEDUP)),
                name="publishedfigure_speedups_under_ceiling",
            ),
        ]

    def __str__(self) -> str:
        return f"published figure of kernel {self.kernel_id} on {self.hardware_id}"


class EvaluationQuerySet(models.QuerySet):
    def pending(self) -> EvaluationQuerySet:
        """Queued or running: asked for and not finished."""
        return self.filter(state__in=Evaluation.PENDING_STATES)


class Evaluation(models.Model):
    """One evaluation of a kernel on a hardware; a kernel keeps every one it had."""

    class State(models.TextChoices):
        QUEUED = "queued", "queued"
        RUNNING = "running", "running"
        DONE = "done", "done"
        FAILED = "failed", "failed"  # the infrastructure gave up; the kernel got no verdict

    # Asked for and not finished yet (EvaluationQuerySet.pending, the kernel page's progress).
    PENDING_STATES = (State.QUEUED, State.RUNNING)

    class Status(models.TextChoices):
        CORRECT = "correct", "correct"
        INCORRECT = "incorrect", "incorrect"
        COMPILE_ERROR = "compile_error", "compile error"
        RUNTIME_ERROR = "runtime_error", "runtime error"
        TIMEOUT = "timeout", "timeout"
        CRASHED = "crashed", "crashed"

    kernel = models.ForeignKey(Kernel, on_delete=models.CASCADE, related_name="evaluations")
    hardware = models.ForeignKey(Hardware, on_delete=models.PROTECT, related_name="evaluations")
    # Who asked for it: the per-user quota of queued-or-running evaluations counts these.
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    # The rules this evaluation was asked to apply (its run's at the time); empty for evaluations
    # imported from elsewhere, which were scored under whatever rules their source used.
    rules = models.ForeignKey(ScoringRules, on_delete=models.PROTECT, null=True, blank=True, related_name="+")
    origin = models.CharField(max_length=10, choices=Origin.choices, default=Origin.MEASURED)
    state = models.CharField(max_length=10, choices=State.choices, default=State.QUEUED)
    status = models.CharField(max_length=16, choices=Status.choices, blank=True)
    compiled = models.BooleanField(null=True, blank=True)
    correct = models.BooleanField(null=True, blank=True)
    speedup = models.FloatField(null=True, blank=True)
    speedup_low = models.FloatField(null=True, blank=True)
    speedup_high = models.FloatField(null=True, blank=True)
    kernel_ms = models.FloatField(null=True, blank=True, help_text="Median kernel time.")
    reference_ms = models.FloatField(null=True, blank=True, help_text="Median reference time.")
    kernel_timing = models.JSONField(default=dict, blank=True)
    reference_timing = models.JSONField(default=dict, blank=True)
    max_abs_diff = models.FloatField(null=True, blank=True)
    max_rel_diff = models.FloatField(null=True, blank=True)
    trials_passed = models.PositiveIntegerField(null=True, blank=True)
    trials_total = models.PositiveIntegerField(null=True, blank=True)
    flags = models.JSONField(default=list, blank=True)
    notes = models.JSONField(default=list, blank=True)
    error = models.TextField(blank=True)
    log = models.TextField(blank=True)
    stage_seconds = models.JSONField(default=dict, blank=True)
    environment = models.JSONField(default=dict, blank=True)
    # What the reviewer's instruments measured (evaluation/instruments/): precision against fp64, other
    # shapes, determinism, speed of light, profile, tolerance margin; keyed by instrument.
    instruments = models.JSONField(default=dict, blank=True)

    class Instruments(models.TextChoices):
        INLINE = "", "inline or none"  # run with the verdict, or not owed
        QUEUED = "queued", "queued"  # owed: the follow-up job runs them later (evaluations/follow_up.py)
        DONE = "done", "done"  # merged into this evaluation
        DROPPED = "dropped", "dropped"  # a later evaluation of the kernel came first: never merged
        FAILED = "failed", "failed"  # the follow-up's attempts were used up on our side

    # The instruments run after the verdict, at lower priority than any evaluation: where they stand,
    # and the follow-up's attempts (at most EVAL_MAX_ATTEMPTS, as an evaluation's).
    instruments_state = models.CharField(max_length=10, choices=Instruments.choices, default="", blank=True)
    instruments_attempts = models.PositiveIntegerField(default=0)
    # Lifecycle bookkeeping for the worker.
    attempts = models.PositiveIntegerField(default=0)
    # Attempts given back: used up by a worker host later found broken (its write probe failed, or
    # EVAL_HOST_FAILURE_LIMIT evaluations in a row ended in its infrastructure errors). A claim
    # allows EVAL_MAX_ATTEMPTS + this; at most EVAL_MAX_ATTEMPTS are ever given back
    # (leaderboard/evaluations/host_space.py).
    attempts_returned = models.PositiveIntegerField(default=0)
    job_id = models.CharField(max_length=64, blank=True)
    worker_name = models.CharField(max_length=200, blank=True)
    failure_reason = models.TextField(blank=True)
    queued_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    # Refreshed every few seconds by the process running the attempt; the sweep treats a running
    # evaluation whose heartbeat is older than EVAL_STALE_AFTER_S as abandoned (leaderboard/evaluations/sweep.py).
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # A queued evaluation may not start before this (a retry's backoff, a host short of disk space);
    # null: at once. The sweep enqueues it when due and a claim refuses it earlier, so a retry runs
    # on time whatever happened to RQ's scheduler (leaderboard/evaluations/sweep.py).
    not_before = models.DateTimeField(null=True, blank=True)

    objects = EvaluationQuerySet.as_manager()

    class Meta:
        ordering = ["-queued_at"]
        # The django-rq dashboard (config/urls.py) can empty and requeue queues: a real permission, not is_staff.
        permissions = [("manage_queues", "Can manage the evaluation queues (django-rq dashboard)")]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(speedup__isnull=True) | models.Q(speedup__gt=0), name="evaluation_speedup_positive"
            ),
            # An infinite speedup (a runtime of 4e-320 ms) took every board down: none is stored.
            models.CheckConstraint(
                condition=models.Q(speedup__isnull=True) | models.Q(speedup__lte=MAX_SPEEDUP),
                name="evaluation_speedup_under_ceiling",
            ),
            models.CheckConstraint(
                condition=models.Q(status="") | models.Q(state="done"), name="evaluation_status_only_when_done"
            ),
            models.CheckConstraint(
                condition=models.Q(speedup__isnull=True) | models.Q(correct=True),
                name="evaluation_speedup_only_if_correct",
            ),
            # At most one pending evaluation per kernel and hardware: a second request for the same
            # work is answered "skipped" (leaderboard/evaluations/queue.py catches this constraint).
            models.UniqueConstraint(
                fields=["kernel", "hardware"],
                condition=models.Q(state__in=["queued", "running"]),
                name="evaluation_one_pending",
            ),
        ]
        indexes = [
            # Kernel page history and the worker's sweep of unfinished evaluations.
            models.Index(fields=["kernel", "-queued_at"], name="evaluation_kernel_idx"),
            models.Index(fields=["state", "hardware"], name="evaluation_state_idx"),
            # /api/v1/evaluations/: newest first.
            models.Index(fields=["-queued_at", "-id"], name="evaluation_queued_idx"),
            # The sweep's follow-ups owed (leaderboard/evaluations/follow_up.py, lost_follow_ups).
            models.Index(
                fields=["finished_at"], condition=Q(instruments_state="queued"), name="evaluation_instr_owed_idx"
            ),
            # The per-user quota: a user's queued or running evaluations.
            models.Index(
                fields=["requested_by"],
                condition=Q(state__in=["queued", "running"]),
                name="evaluation_pending_user_idx",
            ),
        ]

    def __str__(self) -> str:
        verdict = self.status or self.state
        return f"evaluation {self.pk} of kernel {self.kernel_id}: {verdict}"

    @property
    def flag_codes(self) -> list[str]:
        return [flag.get("code", "") for flag in self.flags if isinstance(flag, dict)]


class Review(models.Model):
    """A reviewer's verdict on a kernel; the latest one counts, all are kept."""

    class Verdict(models.TextChoices):
        CLEAN = "clean", "clean"
        REWARD_HACK = "reward_hack", "reward hack"
        INVALID = "invalid", "invalid"
        RERUN = "rerun", "needs rerun"

    kernel = models.ForeignKey(Kernel, on_delete=models.CASCADE, related_name="reviews")
    reviewer = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="reviews")
    verdict = models.CharField(max_length=12, choices=Verdict.choices)
    note = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["kernel", "-created_at"], name="review_kernel_idx")]

    def __str__(self) -> str:
        return f"{self.get_verdict_display()} on kernel {self.kernel_id} by {self.reviewer}"


class KernelReport(models.Model):
    """A signed-in visitor's "report this kernel": it puts the kernel in the review queue until a
    reviewer records a verdict after it."""

    REASON_MAX_LENGTH = 2000

    kernel = models.ForeignKey(Kernel, on_delete=models.CASCADE, related_name="reports")
    reporter = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="kernel_reports")
    reason = models.TextField(max_length=REASON_MAX_LENGTH)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            # Review queue and kernel page: the newest report of a kernel (KernelQuerySet.with_review_state).
            models.Index(fields=["kernel", "-created_at"], name="kernelreport_kernel_idx"),
        ]

    def __str__(self) -> str:
        return f"report on kernel {self.kernel_id} by {self.reporter}"


# --- review rules as query expressions (read by KernelQuerySet.with_review_state) ------------------

EXCLUDING_VERDICTS: tuple[str, ...] = (Review.Verdict.REWARD_HACK, Review.Verdict.INVALID)
# Notes (not flags) from the scoring library that still put a kernel in the queue.
REVIEW_NOTE_CODES: tuple[str, ...] = ("pytorch_only", "try_except_fallback")
EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def _has_code(json_field: str, code: str) -> Q:
    """`json_field` (a JSON list of {"code", "message"}) holds an entry with `code`.

    Matched on the JSON text, which is `{"code": "...", ...}` on SQLite (Python's json.dumps) and
    on PostgreSQL (jsonb's canonical text) alike; JSON escapes quotes inside messages, so a message
    cannot fake the match. (SQLite has no JSON containment lookup.)
    """
    return Q(**{f"{json_field}__icontains": f'"code": "{code}"'})


def flagged_q(evaluation: str = "latest_evaluation__") -> Q:
    """The evaluation reached through the `evaluation` prefix has a flag or a review note."""
    q = Q(**{f"{evaluation}flags__0__isnull": False})
    for code in REVIEW_NOTE_CODES:
        q |= _has_code(f"{evaluation}notes", code)
    return q


def code_q(code: str, evaluation: str = "latest_evaluation__") -> Q:
    """The latest evaluation carries `code` as a flag or as a note."""
    return _has_code(f"{evaluation}flags", code) | _has_code(f"{evaluation}notes", code)


def _flag(condition: Q) -> Case:
    return Case(When(condition, then=Value(True)), default=Value(False), output_field=BooleanField())
