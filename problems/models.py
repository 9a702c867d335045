"""Problem sets, problems, hardware and baseline timings."""

from __future__ import annotations

import hashlib

from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.urls import reverse
from django.utils.text import slugify

LEVELS = (1, 2, 3, 4)
# The largest value of an integer column on every database we run on (PostgreSQL `integer`):
# numbers from outside (file names, results keys, uploads) are validated against it.
DB_INT_MAX = 2**31 - 1


def source_sha256(source: str) -> str:
    return hashlib.sha256(source.encode("utf-8")).hexdigest()


def name_slug(text: str, max_length: int = 60) -> str:
    """The slug a name becomes (`H100_Modal` -> `h100_modal`, `KernelBench v0.1` -> `kernelbench-v01`)."""
    return slugify(text.strip())[:max_length]


def named_by(rows, text: str, max_length: int):
    """The one of `rows` (hardware, problem sets: anything with a slug and a name) that `text`
    names, the same way in every command, API route, page and `kbl` flag: its slug, else its
    display name, case-insensitively, else the row whose slug the text becomes (so that what
    `import_baselines --hardware H100_Modal` created is found again by `import_run --hardware
    H100_Modal`). None when nothing matches."""
    text = (text or "").strip()
    if not text or "\x00" in text:
        return None
    wanted, slug = text.lower(), name_slug(text, max_length)
    rows = list(rows)
    for matches in (
        lambda row: row.slug.lower() == wanted,
        lambda row: row.name.lower() == wanted,
        lambda row: row.slug == slug,
    ):
        found = next((row for row in rows if matches(row)), None)
        if found is not None:
            return found
    return None


def listing(rows: models.QuerySet, most: int = 30) -> str:
    """Rows with a slug and a name as `slug (name), ...` (the first `most`), for error messages
    that ask the user to choose one; "none exists yet" when there are none."""
    shown = [f"{row.slug} ({row.name})" for row in rows[: most + 1]]
    more = ", ..." if len(shown) > most else ""
    return ", ".join(shown[:most]) + more or "none exists yet"


def resolve_by_slug_or_name(queryset: models.QuerySet, text: str, max_length: int) -> models.Model | None:
    """named_by over the few rows of `queryset` that can match (one query)."""
    text = (text or "").strip()
    if not text or "\x00" in text:
        return None
    query = models.Q(slug__iexact=text) | models.Q(name__iexact=text) | models.Q(slug=name_slug(text, max_length))
    return named_by(queryset.filter(query)[:5], text, max_length)


# KernelBench's scoring rules as each version defined them: a problem set is scored by one of these
# and a run records the one it was scored under. KernelBench v0 (Dec 2024) and v0.1 compared every
# output with atol = rtol = 1e-2 ("kernelbench v0 and v0.1 uses fp32, atol = rtol = 1e-02", its
# eval.py); its main branch since Nov 2025 (its pull request 80, get_tolerance_for_precision) uses
# 1e-4 for fp32 and 1e-2 for fp16/bf16. Both check 5 random input sets (eval_from_generations.py)
# and time with CUDA events.
RULE_PRESETS: dict[str, dict] = {
    "kernelbench-v0": {
        "name": "KernelBench v0", "kernelbench_version": "v0",
        "fp32_tolerance": 1e-2, "fp16_tolerance": 1e-2, "bf16_tolerance": 1e-2,
    },
    "kernelbench-v0-1": {
        "name": "KernelBench v0.1", "kernelbench_version": "v0.1",
        "fp32_tolerance": 1e-2, "fp16_tolerance": 1e-2, "bf16_tolerance": 1e-2,
    },
    "kernelbench-main": {
        "name": "KernelBench main (since Nov 2025)", "kernelbench_version": "main",
        "fp32_tolerance": 1e-4, "fp16_tolerance": 1e-2, "bf16_tolerance": 1e-2,
    },
}  # fmt: skip
# Sets that say nothing else are scored as KernelBench scores today.
CURRENT_RULES = "kernelbench-main"
RULES_BY_VERSION = {preset["kernelbench_version"]: slug for slug, preset in RULE_PRESETS.items()}


class ScoringRulesQuerySet(models.QuerySet):
    def preset(self, slug: str) -> ScoringRules:
        """One of RULE_PRESETS, created on first use (a flushed test database, a new install)."""
        rules, _ = self.get_or_create(slug=slug, defaults=RULE_PRESETS[slug])
        return rules

    def for_version(self, version: str) -> ScoringRules:
        """The preset of a KernelBench version ("v0", "v0.1", "main")."""
        return self.preset(RULES_BY_VERSION[version])

    def resolve(self, text: str) -> ScoringRules | None:
        """Rules named by slug, name or KernelBench version, case-insensitively (None: no match)."""
        text = (text or "").strip()
        if text in RULES_BY_VERSION:
            return self.for_version(text)
        return resolve_by_slug_or_name(self, text, 60)


def current_rules_pk() -> int:
    """Default rules of a new problem set or run: KernelBench's current ones."""
    return ScoringRules.objects.preset(CURRENT_RULES).pk


# How a CPU result was timed, whatever its rules name: time.perf_counter_ns (evaluation/child/harness.py).
CPU_CLOCK = "cpu_clock"


class ScoringRules(models.Model):
    """How a KernelBench version scored a kernel: the tolerance for each precision (used as both
    atol and rtol, as KernelBench does), the number of random input sets that must all match, and
    the timing method it names. Evaluations here apply the tolerance and the trial count; the timing
    method is recorded (our harness times one way for every rule set, docs/evaluation.md)."""

    class TimingMethod(models.TextChoices):
        CUDA_EVENT = "cuda_event", "CUDA events"

    slug = models.SlugField(max_length=60, unique=True)
    name = models.CharField(max_length=120, unique=True)
    kernelbench_version = models.CharField(max_length=40, help_text='e.g. "v0", "v0.1", "main".')
    fp32_tolerance = models.FloatField(validators=[MinValueValidator(0.0)])
    fp16_tolerance = models.FloatField(validators=[MinValueValidator(0.0)])
    bf16_tolerance = models.FloatField(validators=[MinValueValidator(0.0)])
    correctness_trials = models.PositiveSmallIntegerField(default=5, validators=[MinValueValidator(1)])
    timing_method = models.CharField(max_length=20, choices=TimingMethod.choices, default=TimingMethod.CUDA_EVENT)

    objects = ScoringRulesQuerySet.as_manager()

    class Meta:
        ordering = ["name"]
        verbose_name_plural = "scoring rules"

    def __str__(self) -> str:
        return self.name

    def tolerance(self, precision: str) -> float:
        """atol = rtol for a run's precision ("fp32", "fp16", "bf16")."""
        return {"fp32": self.fp32_tolerance, "fp16": self.fp16_tolerance, "bf16": self.bf16_tolerance}[precision]

    @property
    def summary(self) -> str:
        """One line for pages and exports: what a reader needs to compare two runs' verdicts."""
        return self.summary_on(Hardware.Kind.GPU)

    def summary_on(self, kind: str) -> str:
        """`summary` for runs on hardware of `kind`: a CPU has no CUDA events, and the harness times
        it by the process's own clock (time.perf_counter_ns, evaluation/child/harness.py)."""
        timing = self.get_timing_method_display() if kind == Hardware.Kind.GPU else "timed by the CPU clock"
        return (
            f"{self.name}: tolerance {self.fp32_tolerance:g} fp32, {self.fp16_tolerance:g} fp16, "
            f"{self.bf16_tolerance:g} bf16; {self.correctness_trials} correctness trials; {timing}"
        )

    def timing_method_on(self, kind: str) -> str:
        """The method that timed a result on hardware of `kind`: the rules' own on a GPU; on a CPU
        there are no CUDA events, and the harness reads the process's clock (CPU_CLOCK)."""
        return self.timing_method if kind == Hardware.Kind.GPU else CPU_CLOCK

    def as_dict(self, kind: str = "gpu") -> dict:
        """The rules as an export writes them for results measured on hardware of `kind`."""
        return {
            "slug": self.slug,
            "name": self.name,
            "kernelbench_version": self.kernelbench_version,
            "tolerance": {"fp32": self.fp32_tolerance, "fp16": self.fp16_tolerance, "bf16": self.bf16_tolerance},
            "correctness_trials": self.correctness_trials,
            "timing_method": self.timing_method_on(kind),
        }


class ProblemSetQuerySet(models.QuerySet):
    def resolve(self, text: str) -> ProblemSet | None:
        """The set that `text` names: slug or name, case-insensitively (resolve_by_slug_or_name)."""
        return resolve_by_slug_or_name(self, text, ProblemSet.SLUG_LENGTH)

    def holding(self, problems: set[tuple[int, int]]) -> list[ProblemSet]:
        """The sets that hold every one of `problems` ((level, number) pairs), by name. Matched
        in Python over the candidate problems (one query), not by one OR clause per pair."""
        held: dict[int, set[tuple[int, int]]] = {}
        candidates = Problem.objects.filter(
            problem_set__in=self, level__in={level for level, _ in problems}, number__in={n for _, n in problems}
        )
        for set_id, level, number in candidates.values_list("problem_set_id", "level", "number"):
            held.setdefault(set_id, set()).add((level, number))
        ids = [set_id for set_id, pairs in held.items() if problems <= pairs] if problems else None
        sets = self if ids is None else self.filter(pk__in=ids)
        return list(sets.order_by("name"))

    def listing(self) -> str:
        """Every set as `slug (name)`, for error messages that ask the user to choose one."""
        return listing(self.order_by("name"))


class ProblemSet(models.Model):
    """A versioned set of problems; fast_p is always computed against one set."""

    SLUG_LENGTH = 60

    objects = ProblemSetQuerySet.as_manager()

    slug = models.SlugField(max_length=SLUG_LENGTH, unique=True)
    name = models.CharField(max_length=120, unique=True)
    version = models.CharField(max_length=40, blank=True)
    description = models.TextField(blank=True)
    source_url = models.URLField(blank=True)
    # The rules the set's runs are scored by unless a run was re-scored under others (Run.rules).
    rules = models.ForeignKey(
        ScoringRules, on_delete=models.PROTECT, related_name="problem_sets", default=current_rules_pk
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def problem_counts(self) -> dict[int, int]:
        """Problems per level: the denominators of fast_p."""
        rows = self.problems.values("level").annotate(n=models.Count("id"))
        counts = {level: 0 for level in LEVELS}
        counts.update({row["level"]: row["n"] for row in rows})
        return counts


class ProblemQuerySet(models.QuerySet):
    def search(self, text: str) -> ProblemQuerySet:
        return self.filter(models.Q(name__icontains=text) | models.Q(tags__icontains=text))


class Problem(models.Model):
    problem_set = models.ForeignKey(ProblemSet, on_delete=models.PROTECT, related_name="problems")
    level = models.PositiveSmallIntegerField(validators=[MinValueValidator(1), MaxValueValidator(4)])
    number = models.PositiveIntegerField(validators=[MinValueValidator(1), MaxValueValidator(DB_INT_MAX)])
    name = models.CharField(max_length=200)
    source = models.TextField()
    source_hash = models.CharField(max_length=64, editable=False)
    # Where the text is public, for a problem stored without it (source "" and the public file's
    # hash: the field's figures, whose problem texts are not ours to redistribute).
    source_url = models.URLField(max_length=500, blank=True, help_text="The text's public location.")
    # Comma-separated, lower case ("matmul,fused"); guessed from the name and the ops used.
    tags = models.CharField(max_length=300, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = ProblemQuerySet.as_manager()

    class Meta:
        ordering = ["problem_set", "level", "number"]
        constraints = [
            models.UniqueConstraint(fields=["problem_set", "level", "number"], name="problem_unique_per_set"),
            models.CheckConstraint(condition=models.Q(level__gte=1, level__lte=4), name="problem_level_1_to_4"),
            models.CheckConstraint(condition=models.Q(number__gte=1), name="problem_number_positive"),
        ]

    def __str__(self) -> str:
        return f"L{self.level} #{self.number} {self.name}"

    def save(self, *args, **kwargs) -> None:
        if self.source or not self.source_hash:  # a text withheld ("") keeps the hash it was given
            self.source_hash = source_sha256(self.source)
        super().save(*args, **kwargs)

    def get_absolute_url(self) -> str:
        return reverse("problem-detail", args=[self.pk])

    @property
    def source_withheld(self) -> bool:
        """Stored without its text: only its hash and where it is public (source_url)."""
        return self.source == "" and bool(self.source_hash)

    @property
    def tag_list(self) -> list[str]:
        return [tag for tag in self.tags.split(",") if tag]

    @property
    def file_name(self) -> str:
        """The file name KernelBench uses for this problem, e.g. `1_Square_matrix_multiplication_.py`."""
        return f"{self.number}_{self.name}.py"


def hardware_slug(text: str) -> str:
    """The slug a hardware name becomes (`H100_Modal` -> `h100_modal`, `NVIDIA H200` -> `nvidia-h200`)."""
    return name_slug(text, Hardware.SLUG_LENGTH)


class HardwareQuerySet(models.QuerySet):
    def resolve(self, text: str) -> Hardware | None:
        """The hardware that `text` names: slug or name, case-insensitively (resolve_by_slug_or_name)."""
        return resolve_by_slug_or_name(self, text, Hardware.SLUG_LENGTH)

    def listing(self) -> str:
        """Every hardware as `slug (name)`, for error messages that ask the user to choose one."""
        return listing(self.order_by("slug"))


class Hardware(models.Model):
    """A class of device that evaluations run on; workers fill in what they find."""

    class Kind(models.TextChoices):
        GPU = "gpu", "GPU"
        CPU = "cpu", "CPU"

    SLUG_LENGTH = 40

    slug = models.SlugField(max_length=SLUG_LENGTH, unique=True, help_text="Queue suffix too: eval-<slug>.")
    name = models.CharField(max_length=120)
    kind = models.CharField(max_length=3, choices=Kind.choices, default=Kind.GPU)
    device_name = models.CharField(max_length=200, blank=True)
    driver_version = models.CharField(max_length=60, blank=True)
    cuda_version = models.CharField(max_length=60, blank=True)
    torch_version = models.CharField(max_length=60, blank=True)
    python_version = models.CharField(max_length=60, blank=True)
    last_seen_at = models.DateTimeField(null=True, blank=True, help_text="Last time a worker reported in.")

    objects = HardwareQuerySet.as_manager()

    class Meta:
        ordering = ["slug"]
        verbose_name_plural = "hardware"

    def __str__(self) -> str:
        return self.name or self.slug

    @property
    def queue_name(self) -> str:
        return f"eval-{self.slug}"

    @property
    def instruments_queue_name(self) -> str:
        """The queue of the instruments run after a verdict: its workers take it after every evaluation queue."""
        return f"instruments-{self.slug}"


class Baseline(models.Model):
    """Reference timing of a problem on a hardware, eager or torch.compile."""

    class Mode(models.TextChoices):
        EAGER = "eager", "PyTorch eager"
        COMPILE = "compile", "torch.compile"

    class Origin(models.TextChoices):
        MEASURED = "measured", "measured here"
        IMPORTED = "imported", "imported"

    problem = models.ForeignKey(Problem, on_delete=models.CASCADE, related_name="baselines")
    hardware = models.ForeignKey(Hardware, on_delete=models.PROTECT, related_name="baselines")
    mode = models.CharField(max_length=10, choices=Mode.choices, default=Mode.EAGER)
    # For compile baselines: KernelBench's file suffix, e.g. "inductor_default", "cudagraphs".
    compile_variant = models.CharField(max_length=60, blank=True)
    mean_ms = models.FloatField()
    std_ms = models.FloatField(null=True, blank=True)
    min_ms = models.FloatField(null=True, blank=True)
    max_ms = models.FloatField(null=True, blank=True)
    num_trials = models.PositiveIntegerField(null=True, blank=True, validators=[MaxValueValidator(DB_INT_MAX)])
    device_name = models.CharField(max_length=200, blank=True)
    origin = models.CharField(max_length=10, choices=Origin.choices, default=Origin.IMPORTED)
    source_file = models.CharField(max_length=300, blank=True)
    recorded_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["problem", "hardware", "mode"]
        constraints = [
            models.UniqueConstraint(
                fields=["problem", "hardware", "mode", "compile_variant"], name="baseline_unique_per_setup"
            ),
            models.CheckConstraint(condition=models.Q(mean_ms__gt=0), name="baseline_mean_positive"),
            models.CheckConstraint(
                condition=models.Q(std_ms__isnull=True) | models.Q(std_ms__gte=0), name="baseline_std_nonnegative"
            ),
        ]

    def __str__(self) -> str:
        variant = f" ({self.compile_variant})" if self.compile_variant else ""
        return f"{self.problem} on {self.hardware.slug}, {self.mode}{variant}: {self.mean_ms:.3g} ms"
