"""Fixtures for the API tests: a small problem set with two levels, hardware, a run with kernels."""

from __future__ import annotations

import pytest
from django.core.cache import cache

from leaderboard.models import Evaluation, Kernel, Lab, LanguageModel, Origin, Run
from problems.models import Baseline, Hardware, Problem, ProblemSet
from tests.rescoring import run_rescorer

PROBLEM = """import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, a, b):
        return torch.matmul(a, b)

def get_inputs():
    return [torch.randn(8, 8), torch.randn(8, 8)]

def get_init_inputs():
    return []
"""

KERNEL = """import torch
import torch.nn as nn

class ModelNew(nn.Module):
    def forward(self, a, b):
        return a @ b
"""


@pytest.fixture(autouse=True)
def _fresh_throttle_and_static(settings):
    """The write throttle counts in the cache: start every test at zero. Static files: no manifest."""
    cache.clear()
    settings.STORAGES = {
        **settings.STORAGES,
        "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    }
    yield
    cache.clear()


@pytest.fixture
def problem_set(db) -> ProblemSet:
    problem_set = ProblemSet.objects.create(slug="kb", name="KernelBench test")
    for level, number, name in [(1, 1, "Square_matmul"), (1, 2, "GELU"), (2, 1, "Conv_ReLU")]:
        Problem.objects.create(
            problem_set=problem_set,
            level=level,
            number=number,
            name=name,
            source=PROBLEM,
            tags="matmul" if number == 1 else "",
        )
    return problem_set


@pytest.fixture
def hardware(db) -> Hardware:
    return Hardware.objects.create(slug="cpu", name="CPU", kind=Hardware.Kind.CPU)


@pytest.fixture
def baseline(problem_set, hardware) -> Baseline:
    problem = problem_set.problems.get(level=1, number=1)
    return Baseline.objects.create(problem=problem, hardware=hardware, mean_ms=2.0)


@pytest.fixture
def model(db) -> LanguageModel:
    return LanguageModel.objects.create(name="Model A", lab=Lab.objects.create(name="Lab A"))


@pytest.fixture
def run(problem_set, hardware, model) -> Run:
    """A measured run: problem 1 correct at 2x, problem 2 incorrect, level 2 not attempted."""
    run = Run.objects.create(model=model, problem_set=problem_set, hardware=hardware, setting="one-shot")
    for number, correct, speedup in [(1, True, 2.0), (2, False, None)]:
        problem = problem_set.problems.get(level=1, number=number)
        kernel = Kernel.objects.create(run=run, problem=problem, source=KERNEL)
        evaluation = Evaluation.objects.create(
            kernel=kernel,
            hardware=hardware,
            origin=Origin.MEASURED,
            state=Evaluation.State.DONE,
            status=Evaluation.Status.CORRECT if correct else Evaluation.Status.INCORRECT,
            compiled=True,
            correct=correct,
            speedup=speedup,
        )
        kernel.latest_evaluation = evaluation
        kernel.save()
    run_rescorer()  # scored, as the background re-scorer leaves it
    return run
