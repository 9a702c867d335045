"""The field-sized dataset of issue 13, generated reproducibly through the project's models with
bulk inserts: labs, models, runs of one 270-problem set, kernels with their evaluations (a realistic
mix of statuses and speedups), reviews, reports, reported scores and launch posts.

SCALE is the number of kernels (= done evaluations): "1.3M" gives 5,000 runs of ~260 kernels,
400 models, 60 labs; "20k" gives 77 runs. The same scale and seed always give the same rows.
Run through `python -m benchmarks.web.bench generate --scale 20k`; on PostgreSQL the kernels and
evaluations come from benchmarks/web/bulk.py."""

from __future__ import annotations

import datetime as dt
import hashlib
import math
import random
import time
from collections.abc import Callable
from dataclasses import dataclass

from django.contrib.auth.models import User
from django.db import connection, transaction
from django.utils import timezone

from benchmarks.web import bulk
from leaderboard.models import (
    Evaluation,
    Kernel,
    KernelReport,
    Lab,
    LanguageModel,
    LaunchPost,
    Origin,
    ReportedScore,
    Review,
    Run,
    alias_key,
)
from problems.models import Hardware, Problem, ProblemSet

LEVEL_SIZES = {1: 100, 2: 100, 3: 50, 4: 20}  # KernelBench's 270 problems
KERNELS_PER_RUN = 260
BATCH_RUNS = 50  # runs inserted per transaction
STATUSES = (  # (status, share) of evaluated kernels
    ("correct", 0.55),
    ("incorrect", 0.2),
    ("compile_error", 0.15),
    ("runtime_error", 0.05),
    ("timeout", 0.03),
    ("crashed", 0.02),
)
TOPICS = ("conv", "matmul", "norm", "softmax", "attention", "pool", "gelu", "reduce", "fused", "model")


def parse_scale(text: str) -> int:
    """'20k' -> 20000, '1.3M' -> 1300000, '5000' -> 5000."""
    text = text.strip().lower()
    factor = {"k": 1_000, "m": 1_000_000}.get(text[-1:], 1)
    return int(float(text.rstrip("km")) * factor)


@dataclass
class Shape:
    kernels: int
    runs: int
    models: int
    labs: int
    reviews: int
    reported: int
    posts: int

    @classmethod
    def of(cls, kernels: int) -> Shape:
        runs = max(2, round(kernels / KERNELS_PER_RUN))
        f = min(1.0, kernels / 1_300_000)
        return cls(
            kernels, runs, max(4, min(400, runs // 12)), max(2, min(60, runs // 80)),
            max(20, int(2000 * f)), max(50, int(5000 * f)), max(10, int(500 * f)),
        )  # fmt: skip


def generate(scale: int, seed: int = 0, write: Callable[[str], None] = print) -> dict[str, float]:
    """Fill an empty database; returns the seconds each phase took."""
    rng = random.Random(seed)
    shape = Shape.of(scale)
    timings: dict[str, float] = {}
    started = time.monotonic()
    problem_set, problems, hardware = _catalogue()
    labs, models = _labs_and_models(rng, shape)
    timings["catalogue"] = time.monotonic() - started
    started = time.monotonic()
    runs = _runs(rng, shape, problem_set, hardware, models)
    if connection.vendor == "postgresql":
        bulk.generate(runs, hardware.pk, seed, write)
    else:
        for first in range(0, len(runs), BATCH_RUNS):
            with transaction.atomic():
                _kernels_and_evaluations(rng, runs[first : first + BATCH_RUNS], problems, hardware)
            write(f"kernels and evaluations: {min(first + BATCH_RUNS, len(runs))} of {len(runs)} runs")
    timings["kernels_and_evaluations"] = time.monotonic() - started
    started = time.monotonic()
    _reviews(rng, shape)
    _reported_and_posts(rng, shape, labs, models)
    timings["reviews_reported_posts"] = time.monotonic() - started
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")
    return timings


def _catalogue() -> tuple[ProblemSet, list[Problem], Hardware]:
    problem_set = ProblemSet.objects.create(slug="kernelbench", name="KernelBench", version="0.1")
    rows = []
    for level, size in LEVEL_SIZES.items():
        for number in range(1, size + 1):
            topic = TOPICS[(number * 7 + level) % len(TOPICS)]
            source = f"import torch\nclass Model(torch.nn.Module):  # {topic} {level}/{number}\n    pass\n"
            rows.append(
                Problem(
                    problem_set=problem_set,
                    level=level,
                    number=number,
                    name=f"{number}_{topic.title()}_{level}",
                    source=source,
                    source_hash=hashlib.sha256(source.encode()).hexdigest(),
                    tags=topic,
                )  # fmt: skip
            )
    problems = Problem.objects.bulk_create(rows)
    hardware = Hardware.objects.create(slug="h100", name="H100")
    return problem_set, problems, hardware


def _labs_and_models(rng: random.Random, shape: Shape) -> tuple[list[Lab], list[LanguageModel]]:
    labs = Lab.objects.bulk_create([Lab(name=f"Lab {n}", slug=f"lab-{n}") for n in range(shape.labs)])
    start = dt.date(2024, 1, 1)
    models = [
        LanguageModel(
            name=f"model-{n}",
            name_key=alias_key(f"model-{n}"),  # bulk_create skips save(), which sets it
            slug=f"model-{n}",
            lab=labs[n % len(labs)],
            release_date=start + dt.timedelta(days=rng.randrange(700)),
            open_weights=rng.random() < 0.4,
        )  # fmt: skip
        for n in range(shape.models)
    ]
    return labs, LanguageModel.objects.bulk_create(models)


def _runs(rng: random.Random, shape: Shape, problem_set, hardware, models) -> list[Run]:
    # The first model holds 100 runs (the "model with many runs"); the rest spread evenly.
    owners = [models[0]] * min(100, shape.runs // 2) + [models[n % len(models)] for n in range(shape.runs)]
    settings = ("one-shot", "best-of-k", "agent")
    runs = [
        Run(
            model=owner,
            problem_set=problem_set,
            hardware=hardware,
            name=f"run-{n}",
            setting=settings[n % 3],
            samples_per_problem=2 if n % 10 == 0 else 1,
            origin=Origin.IMPORTED if rng.random() < 0.3 else Origin.MEASURED,
            rules_id=problem_set.rules_id,  # bulk_create skips Run.save, which would set it
        )  # fmt: skip
        for n, owner in enumerate(owners[: shape.runs])
    ]
    return Run.objects.bulk_create(runs)


def _kernels_and_evaluations(rng: random.Random, runs: list[Run], problems: list[Problem], hardware) -> None:
    kernels = []
    for run in runs:
        for problem in problems:
            samples = run.samples_per_problem if problem.level == 1 else 1
            for sample in range(samples):
                if sample == 0 and rng.random() < 0.04:
                    continue  # a problem the model gave no first sample for
                source = f"class ModelNew:  # run {run.pk} problem {problem.pk} sample {sample}\n    pass\n"
                kernels.append(
                    Kernel(
                        run=run,
                        problem=problem,
                        sample_index=sample,
                        source=source,
                        backend="cuda",
                        source_hash=hashlib.sha256(source.encode()).hexdigest(),
                    )  # fmt: skip
                )
    kernels = Kernel.objects.bulk_create(kernels, batch_size=5000)
    origins = {run.pk: run.origin for run in runs}
    evaluations = Evaluation.objects.bulk_create(
        [_evaluation(rng, kernel, hardware, origins[kernel.run_id]) for kernel in kernels], batch_size=5000
    )
    assert len(evaluations) == len(kernels)
    kernel_table, evaluation_table = Kernel._meta.db_table, Evaluation._meta.db_table
    ids = ",".join(str(run.pk) for run in runs)
    with connection.cursor() as cursor:  # one statement per batch, not one per kernel
        cursor.execute(
            f"UPDATE {kernel_table} SET latest_evaluation_id = e.id FROM {evaluation_table} e "
            f"WHERE e.kernel_id = {kernel_table}.id AND {kernel_table}.run_id IN ({ids})"
        )


def _evaluation(rng: random.Random, kernel: Kernel, hardware, origin: str) -> Evaluation:
    pick, status = rng.random(), STATUSES[-1][0]
    for name, share in STATUSES:
        if pick < share:
            status = name
            break
        pick -= share
    correct = status == "correct"
    speedup = round(math.exp(rng.gauss(-0.1, 0.6)), 4) if correct else None
    if correct and origin == Origin.IMPORTED and rng.random() < 0.05:
        speedup = None  # imported without a baseline: correct-unscored
    flags = [{"code": "excessive_speedup", "message": "too fast"}] if correct and rng.random() < 0.02 else []
    now = timezone.now()
    return Evaluation(
        kernel=kernel, hardware=hardware, origin=origin, state="done", status=status,
        compiled=status not in ("compile_error",), correct=correct, speedup=speedup,
        kernel_ms=1.0, reference_ms=speedup or None, flags=flags, started_at=now, finished_at=now,
    )  # fmt: skip


def _reviews(rng: random.Random, shape: Shape) -> None:
    reviewer, _ = User.objects.get_or_create(username="bench-reviewer")
    reporter, _ = User.objects.get_or_create(username="bench-visitor")
    top = Kernel.objects.order_by("pk").values_list("pk", flat=True).last() or 0
    picked = sorted({rng.randrange(1, top + 1) for _ in range(shape.reviews)})
    kernel_ids = set(Kernel.objects.filter(pk__in=picked).values_list("pk", flat=True))
    verdicts = ("clean", "clean", "reward_hack", "invalid", "rerun")
    Review.objects.bulk_create(
        [Review(kernel_id=pk, reviewer=reviewer, verdict=rng.choice(verdicts)) for pk in sorted(kernel_ids)]
    )
    reported = [pk for pk in sorted(kernel_ids) if rng.random() < 0.2]
    KernelReport.objects.bulk_create([KernelReport(kernel_id=pk, reporter=reporter, reason="fast") for pk in reported])


def _reported_and_posts(rng: random.Random, shape: Shape, labs, models) -> None:
    variants = [f"KernelBench level {n % 4 + 1} variant {n}" for n in range(30)]
    start = dt.date(2024, 3, 1)
    seen = set()
    scores = []
    while len(scores) < shape.reported:
        model, variant = rng.choice(models), rng.choice(variants)
        url = f"https://example.com/{model.slug}/{len(scores)}"
        if (model.pk, variant) in seen:
            continue
        seen.add((model.pk, variant))
        scores.append(
            ReportedScore(
                model=model,
                variant=variant,
                metric="fast_1",
                value=round(rng.uniform(1, 90), 1),
                unit="%",
                reported_on=start + dt.timedelta(days=rng.randrange(600)),
                source_url=url,
            )  # fmt: skip
        )
    ReportedScore.objects.bulk_create(scores)
    LaunchPost.objects.bulk_create(
        [
            LaunchPost(
                lab=rng.choice(labs),
                model=rng.choice(models),
                title=f"Launch {n}",
                url=f"https://example.com/post/{n}",
                published_on=start + dt.timedelta(days=rng.randrange(600)),
                lists_kernelbench=rng.random() < 0.3,
            )  # fmt: skip
            for n in range(shape.posts)
        ]
    )
