"""Shared helpers for the page tests (tests/django/test_pages_*.py) and the browser tests.

Import the fixtures a test module needs by name, e.g.
`from tests.pagekit import plain_static  # noqa: F401`.
"""

from __future__ import annotations

import datetime as dt
import itertools

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from leaderboard.models import Evaluation, Kernel, Lab, LanguageModel, ReportedScore, Run
from problems.models import Hardware, Problem, ProblemSet
from tests.rescoring import run_rescorer

PLAIN_STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}
REFERENCE = "import torch\nimport torch.nn as nn\n\nclass Model(nn.Module):\n    def forward(self, x):\n        return torch.relu(x)\n"
_counter = itertools.count(1)


@pytest.fixture(autouse=True)
def plain_static(settings):
    """Pages render {% static %}; the manifest storage needs collectstatic, tests do not run it."""
    settings.STORAGES = PLAIN_STORAGES


def count_queries(client, url: str) -> int:
    # Rows written in the test's transaction wait for the re-scorer (production re-scores after
    # commit, or in the background): it runs first, so the page shows them and the count is its own.
    run_rescorer()
    with CaptureQueriesContext(connection) as context:
        response = client.get(url)
    assert response.status_code == 200, (url, response.status_code)
    return len(context.captured_queries)


def make_set(name: str = "Test set", levels: tuple[int, ...] = (1, 1, 2)) -> ProblemSet:
    problem_set = ProblemSet.objects.create(name=name, slug=name.lower().replace(" ", "-"))
    numbers: dict[int, int] = {}
    for level in levels:
        numbers[level] = numbers.get(level, 0) + 1
        Problem.objects.create(
            problem_set=problem_set,
            level=level,
            number=numbers[level],
            name=f"Op_{level}_{numbers[level]}",
            source=REFERENCE,
        )
    return problem_set


def make_hardware(slug: str = "h200") -> Hardware:
    return Hardware.objects.get_or_create(slug=slug, defaults={"name": slug.upper()})[0]


def make_model(name: str | None = None, **extra) -> LanguageModel:
    lab = Lab.objects.get_or_create(name="Test Lab")[0]
    return LanguageModel.objects.create(name=name or f"Model {next(_counter)}", lab=lab, **extra)


def evaluate(
    kernel: Kernel,
    speedup: float | None,
    hardware: Hardware | None = None,
    finished_at: dt.datetime = dt.datetime(2026, 1, 1, tzinfo=dt.UTC),
    **extra,
) -> Evaluation:
    correct = speedup is not None
    evaluation = Evaluation.objects.create(
        kernel=kernel,
        hardware=hardware or kernel.run.hardware,
        state=Evaluation.State.DONE,
        status=Evaluation.Status.CORRECT if correct else Evaluation.Status.INCORRECT,
        compiled=True,
        correct=correct,
        speedup=speedup,
        speedup_low=speedup * 0.9 if correct else None,
        speedup_high=speedup * 1.1 if correct else None,
        kernel_ms=1.0 / speedup if correct else None,
        reference_ms=1.0 if correct else None,
        kernel_timing={"samples": [1.0, 1.1, 0.9]} if correct else {},
        finished_at=finished_at,
        **extra,
    )
    kernel.latest_evaluation = evaluation
    kernel.save(update_fields=["latest_evaluation"])
    return evaluation


def make_run(
    problem_set: ProblemSet,
    speedups: list[float | None] | None = None,
    model: LanguageModel | None = None,
    source_note: str = "",
    **extra,
) -> Run:
    """A run with one evaluated kernel per problem of the set; `speedups` in problem order
    (None: incorrect). Without speedups every kernel gets 1.5x. Every run's kernels have the same
    source unless `source_note` (a comment added to each) tells them apart."""
    hardware = extra.pop("hardware", None) or make_hardware()
    run = Run.objects.create(model=model or make_model(), problem_set=problem_set, hardware=hardware, **extra)
    problems = list(problem_set.problems.order_by("level", "number"))
    values = speedups if speedups is not None else [1.5] * len(problems)
    for problem, speedup in zip(problems, values, strict=False):
        kernel = Kernel.objects.create(
            run=run, problem=problem, source=REFERENCE.replace("class Model(", "class ModelNew(") + source_note
        )
        evaluate(kernel, speedup)
    return run


def make_reported(
    model: LanguageModel, value: float = 10.0, variant: str = "KernelBench v0 L1", **extra
) -> ReportedScore:
    defaults = {
        "metric": "fast_1",
        "unit": "%",
        "setting": "one-shot",
        "reported_on": dt.date(2025, 2, 14),
        "source_url": f"https://example.com/{next(_counter)}",
    }
    defaults.update(extra)
    return ReportedScore.objects.create(model=model, variant=variant, value=value, **defaults)
