"""Labs, models, runs, kernels, evaluations, reported scores, launch posts and reviews."""

from __future__ import annotations

import datetime as dt
import hashlib
from dataclasses import dataclass

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import BooleanField, Case, DateTimeField, F, FloatField, OuterRef, Q, Subquery, Value, When
from django.db.models.functions import Cast, Coalesce, Now
from django.urls import reverse
from django.utils.text import slugify

from evaluation.metrics import MAX_SPEEDUP
from problems.models import DB_INT_MAX, Hardware, Problem, ProblemSet, ScoringRules, source_sha256
from problems.text import name_problem, name_skeleton, normalise_name


def unique_slug(model: type[models.Model], text: str, max_length: int = 80) -> str:
    """A slug for `text` that no row of `model` has yet (suffixes -2, -3, ... on collision)."""
    base = slugify(text)[:max_length] or "item"
    slug, n = base, 2
    while model.objects.filter(slug=slug).exists():
        slug = f"{base[: max_length - 6]}-{n}"
        n += 1
    return slug


class Lab(models.Model):
    name = models.CharField(max_length=120, unique=True)
    slug = models.SlugField(max_length=80, unique=True)
    website = models.URLField(blank=True)
    is_demo = models.BooleanField(default=False, help_text="Synthetic row made by seed_demo.")

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def save(self, *args, **kwargs) -> None:
        if not self.slug:
            self.slug = unique_slug(Lab, self.name)
        super().save(*args, **kwargs)


class LanguageModel(models.Model):
    """A language model that writes kernels (not Django's Model, nor KernelBench's `class Model`)."""

    name = models.CharField(max_length=120, unique=True)
    # One name, one record: two names whose skeletons agree look alike (`GPT-4о` with a Cyrillic о
    # is `GPT-4o`), so the second is found as the first, never made beside it.
    name_key = models.CharField(max_length=400, unique=True, editable=False, help_text="alias_key(name).")
    slug = models.SlugField(max_length=80, unique=True)
    lab = models.ForeignKey(Lab, on_delete=models.PROTECT, related_name="models", null=True, blank=True)
    release_date = models.DateField(null=True, blank=True)
    open_weights = models.BooleanField(null=True, blank=True, help_text="Empty when unknown.")
    url = models.URLField(blank=True)
    is_demo = models.BooleanField(default=False, help_text="Synthetic row made by seed_demo.")
    added_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]
        indexes = [models.Index(fields=["-added_at"], name="model_added_idx")]  # overview: last model added

    def __str__(self) -> str:
        return self.name

    def save(self, *args, **kwargs) -> None:
        self.name = normalise_name(self.name)
        self.name_key = alias_key(self.name)
        if not self.slug:
            self.slug = unique_slug(LanguageModel, model_slug_text(self.name))
        if kwargs.get("update_fields") is not None and "name" in kwargs["update_fields"]:
            kwargs["update_fields"] = {*kwargs["update_fields"], "name_key"}
        super().save(*args, **kwargs)

    def clean(self) -> None:
        """The admin's check: a name that is a name (problems.text.name_problem), and no other model
        whose name looks the same."""
        super().clean()
        if problem := name_problem(self.name or ""):
            raise ValidationError({"name": f"The name {problem}."})
        same = LanguageModel.objects.filter(name_key=alias_key(self.name)).exclude(pk=self.pk).first()
        if same is not None:
            raise ValidationError({"name": f"The name looks like model {same.pk}'s ({same.name!r}): merge instead."})

    def lock(self) -> None:
        """Lock this model's row until the transaction ends: concurrent requests that find or make a
        run of this model (imports, submissions) take turns, so they agree on one run."""
        list(LanguageModel.objects.select_for_update().filter(pk=self.pk).values_list("pk"))

    def get_absolute_url(self) -> str:
        return reverse("model-detail", args=[self.slug])


def model_slug_text(name: str) -> str:
    """What a new model's slug is made from: its skeleton, so a look-alike name gets the slug of the
    name it looks like (and so finds that model first); when the skeleton holds letters a slug
    cannot (`GPT-4日`), a short hash of it is added, so the slug never is another name's (`gpt-4`)."""
    skeleton = name_skeleton(name)
    if any(char.isalnum() and not char.isascii() for char in skeleton):
        return f"{skeleton} {hashlib.sha256(skeleton.encode()).hexdigest()[:6]}"
    return skeleton


def alias_key(text: str) -> str:
    """How names and aliases are compared: their skeleton (problems.text.name_skeleton): case,
    runs of white space, accents, invisible characters and look-alike letters of other scripts
    (Cyrillic, Greek; full-width and mathematical letters) set aside. Nothing else is normalised:
    `gpt-o1` and `o1` are different names (never a guess)."""
    return name_skeleton(text)


class ModelAlias(models.Model):
    """A name another source uses for a model (`claude-3-5-sonnet-20241022`, `gpt-o1`): one model,
    one record, whoever names it. Matched exactly (alias_key), never by similarity."""

    alias = models.CharField(max_length=200, help_text="As the source writes it.")
    key = models.CharField(max_length=200, unique=True, editable=False, help_text="alias_key(alias): what is matched.")
    model = models.ForeignKey(LanguageModel, on_delete=models.CASCADE, related_name="aliases")
    source = models.CharField(max_length=200, blank=True, help_text="Who uses this name (a file, a leaderboard).")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["key"]
        verbose_name_plural = "model aliases"

    def __str__(self) -> str:
        return f"{self.alias} -> {self.model_id}"

    def save(self, *args, **kwargs) -> None:
        self.key = alias_key(self.alias)
        super().save(*args, **kwargs)

    def conflict(self) -> AliasConflict | None:
        """Why this alias may not be stored for its model; None when it may. The one rule for every
        way an alias is added (model_names.add_alias for importers, clean() for the admin)."""
        key, model = alias_key(self.alias), self.model
        if not key:
            return AliasConflict("an alias needs a name", nothing_to_store=True)
        if key == alias_key(model.name):
            return AliasConflict(f"{self.alias!r} is the model's own name", nothing_to_store=True)
        # find_model looks at aliases before names: this alias would take the other model's name over.
        named = LanguageModel.objects.filter(name_key=key)
        named = named.exclude(pk=model.pk).first() if model.pk else named.first()
        if named is not None:
            return AliasConflict(f"{self.alias!r} is the name of model {named.pk}; merge the two models instead")
        stored = ModelAlias.objects.filter(key=key).exclude(pk=self.pk).first()
        if stored is None:
            return None
        if model.pk and stored.model_id == model.pk:
            return AliasConflict(f"the alias {self.alias!r} is stored for this model already", nothing_to_store=True)
        taken = f"the alias {self.alias!r} already names model {stored.model_id}; merge the two models instead"
        return AliasConflict(taken)

    def clean(self) -> None:
        super().clean()
        conflict = self.conflict() if self._model_known() else None
        if conflict is not None:
            raise ValidationError({"alias": conflict.reason})

    def _model_known(self) -> bool:
        try:
            return self.model is not None
        except LanguageModel.DoesNotExist:  # no model chosen: the form says so
            return False


@dataclass(frozen=True)
class AliasConflict:
    reason: str
    nothing_to_store: bool = False  # no name, or one that already names this model: not an error for importers


class ModelMerge(models.Model):
    """The audit row of one merge of a model into another (leaderboard/ingest/model_names.merge_models):
    the merged model is gone, so its name, slug and what moved are kept here."""

    merged_name = models.CharField(max_length=120)
    merged_slug = models.CharField(max_length=80)
    into = models.ForeignKey(LanguageModel, on_delete=models.PROTECT, related_name="merges")
    moved = models.JSONField(default=dict, help_text="How many runs, reported scores, launch posts and aliases moved.")
    merged_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    merged_by_name = models.CharField(max_length=150, blank=True, help_text="Who, as text (kept if the user goes).")
    merged_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-merged_at"]

    def __str__(self) -> str:
        return f"{self.merged_name} merged into {self.into_id} at {self.merged_at:%Y-%m-%d %H:%M}"


class Origin(models.TextChoices):
    MEASURED = "measured", "measured here"
    IMPORTED = "imported", "imported, unverified"
    DEMO = "demo", "demo data (synthetic)"  # made by seed_demo; never a measurement


class RunQuerySet(models.QuerySet):
    def created_by(self, user) -> RunQuerySet:
        """The runs `user` made (the problem page's "one of your runs")."""
        return self.filter(created_by=user) if user is not None and user.is_authenticated else self.none()

    def for_leaderboard(self, problem_set: ProblemSet, hardware: Hardware | None = None) -> RunQuerySet:
        runs = self.filter(problem_set=problem_set).select_related("model__lab", "hardware", "problem_set")
        return runs.filter(hardware=hardware) if hardware else runs


class Precision(models.TextChoices):
    """KernelBench's `precision` option: the model and inputs are cast to it (tolerance 1e-4 for
    fp32, 1e-2 otherwise)."""

    FP32 = "fp32", "fp32"
    FP16 = "fp16", "fp16"
    BF16 = "bf16", "bf16"


class Run(models.Model):
    """One model attempting one problem set, in one setting, on one hardware."""

    model = models.ForeignKey(LanguageModel, on_delete=models.PROTECT, related_name="runs")
    problem_set = models.ForeignKey(ProblemSet, on_delete=models.PROTECT, related_name="runs")
    hardware = models.ForeignKey(Hardware, on_delete=models.PROTECT, related_name="runs")
    name = models.CharField(max_length=200, blank=True, help_text="Optional label, e.g. the run folder's name.")
    setting = models.CharField(max_length=120, default="one-shot", help_text="one-shot, best-of-k, agent, ...")
    turns = models.PositiveIntegerField(null=True, blank=True)
    samples_per_problem = models.PositiveIntegerField(
        default=1, validators=[MinValueValidator(1), MaxValueValidator(DB_INT_MAX)]
    )
    precision = models.CharField(
        max_length=4, choices=Precision.choices, default=Precision.FP32, help_text="Part of the run's setting."
    )
    origin = models.CharField(max_length=10, choices=Origin.choices, default=Origin.MEASURED)
    # The rules the run is scored under: its problem set's when it is made; changed only by a
    # re-score (ingest/run_import.rescore_run), which keeps the earlier evaluations.
    rules = models.ForeignKey(ScoringRules, on_delete=models.PROTECT, related_name="runs")
    notes = models.TextField(blank=True)
    # Set on a run imported from a leaderboard someone else published (import_kernelbench_leaderboard):
    # which one. Such a run holds only the kernels that leaderboard lists (its best correct ones),
    # so every problem it does not list counts as failed; pages say so wherever the run appears.
    published_source = models.CharField(
        max_length=200, blank=True, help_text="The published leaderboard this run's kernels come from, if any."
    )
    is_demo = models.BooleanField(default=False, help_text="Synthetic row made by seed_demo.")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    # Stored by the read model (leaderboard/reads/board/store.py): lists never count kernels.
    n_kernels = models.PositiveIntegerField(default=0, editable=False)

    objects = RunQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]
        # Writes into a run (importing into it, adding kernels, verify) are its creator's, or of a
        # user with this permission (superusers have it). Run.writable_by says who may.
        permissions = [("write_any_run", "Can import into, add kernels to and verify any run")]
        constraints = [
            models.CheckConstraint(condition=models.Q(samples_per_problem__gte=1), name="run_samples_positive")
        ]
        indexes = [
            # Leaderboard: runs of one problem set, optionally on one hardware.
            models.Index(fields=["problem_set", "hardware"], name="run_leaderboard_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.model} · {self.setting} · {self.hardware.slug}"

    def save(self, *args, **kwargs) -> None:
        if self.rules_id is None:
            self.rules_id = self.problem_set.rules_id
        super().save(*args, **kwargs)

    def get_absolute_url(self) -> str:
        return reverse("run-detail", args=[self.pk])

    @property
    def rules_summary(self) -> str:
        """The rules it was scored under, as they apply on its hardware (no CUDA events on a CPU)."""
        return self.rules.summary_on(self.hardware.kind)

    def writable_by(self, user) -> bool:
        """Whether `user` may write into this run: its creator, or a holder of write_any_run.
        `None` is the server's own command line (import_run), which may."""
        if user is None:
            return True
        if not user.is_authenticated:
            return False
        return (self.created_by_id is not None and self.created_by_id == user.pk) or user.has_perm(WRITE_ANY_RUN)


WRITE_ANY_RUN = "leaderboard.write_any_run"


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
    # with_review_state, written by leaderboard/reads/board/store.py after every write that changes it).
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
    # evaluation's, else the published figure (leaderboard/reads/board/store.py).
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
        """How a published figure is labelled wherever it is shown: "published, L40S"."""
        return f"published, {self.published_hardware}" if self.published_hardware else "published"


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
                fields=["requested_by"], condition=Q(state__in=["queued", "running"]), name="evaluation_pending_user_idx"
            ),
        ]

    def __str__(self) -> str:
        verdict = self.status or self.state
        return f"evaluation {self.pk} of kernel {self.kernel_id}: {verdict}"

    @property
    def flag_codes(self) -> list[str]:
        return [flag.get("code", "") for flag in self.flags if isinstance(flag, dict)]


class ReportedScore(models.Model):
    """A number a lab or paper published. Always shown apart from scores measured here."""

    class Unit(models.TextChoices):
        PERCENT = "%", "percent"
        TIMES = "x", "times (speedup)"

    class DatePrecision(models.TextChoices):
        DAY = "day", "day"
        MONTH = "month", "month"

    model = models.ForeignKey(LanguageModel, on_delete=models.PROTECT, related_name="reported_scores")
    variant = models.CharField(max_length=200, help_text="As the source names it, e.g. 'KernelBench Hard'.")
    metric = models.CharField(max_length=60)
    value = models.FloatField()
    unit = models.CharField(max_length=1, choices=Unit.choices)
    setting = models.CharField(max_length=300, blank=True)
    hardware_name = models.CharField(max_length=120, blank=True)
    reported_on = models.DateField(help_text="For month-only dates, the first of the month.")
    date_precision = models.CharField(max_length=5, choices=DatePrecision.choices, default=DatePrecision.DAY)
    source_url = models.URLField(max_length=500)
    caveat = models.TextField(blank=True, help_text="Shown beside the score wherever it appears.")
    entered_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-reported_on", "model"]
        constraints = [
            models.UniqueConstraint(
                fields=["model", "variant", "metric", "setting", "source_url"], name="reportedscore_unique"
            ),
            models.CheckConstraint(
                condition=models.Q(unit="%", value__gte=0, value__lte=100) | models.Q(unit="x", value__gt=0),
                name="reportedscore_value_in_range",
            ),
        ]
        indexes = [models.Index(fields=["model", "-reported_on"], name="reportedscore_model_idx")]

    def __str__(self) -> str:
        return f"{self.model}: {self.variant} {self.metric} = {self.display_value}"

    @property
    def display_value(self) -> str:
        return f"{self.value:g}{self.unit}" if self.unit == "%" else f"{self.value:g}x"

    @property
    def display_date(self) -> str:
        if self.date_precision == self.DatePrecision.MONTH:
            return self.reported_on.strftime("%Y-%m")
        return self.reported_on.isoformat()


class LaunchPost(models.Model):
    """A lab's model launch post, and whether it lists KernelBench."""

    lab = models.ForeignKey(Lab, on_delete=models.PROTECT, related_name="launch_posts")
    model = models.ForeignKey(
        LanguageModel, on_delete=models.SET_NULL, null=True, blank=True, related_name="launch_posts"
    )
    title = models.CharField(max_length=300)
    url = models.URLField(max_length=500, unique=True)
    published_on = models.DateField()
    lists_kernelbench = models.BooleanField(default=False)
    kernelbench_score = models.CharField(max_length=200, blank=True, help_text="As the post states it.")
    is_demo = models.BooleanField(default=False, help_text="Synthetic row made by seed_demo.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-published_on"]
        indexes = [models.Index(fields=["lists_kernelbench", "-published_on"], name="launchpost_kb_idx")]

    def __str__(self) -> str:
        return f"{self.lab}: {self.title} ({self.published_on})"


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


# --- the boards' read model (written by leaderboard/reads/board/store.py) ---------------------------


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
    # (leaderboard.reads.board.store.measured_here is the one place that reads it so).
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
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["run", "level", "with_excluded"], name="runscore_unique"),
        ]

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
    # A run whose re-scoring failed is set aside (board_store.refresh_runs): its last stored scores
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
    entries (leaderboard/reads/board/store.py). Its DirtyRun row is the queue; these say what to do."""

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
