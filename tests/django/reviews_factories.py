"""Small factories for the review workflow's tests (tests/django/test_reviews_*.py)."""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from leaderboard.boards import marks as board_marks
from leaderboard.boards import rescoring as board_rescoring
from leaderboard.models import Evaluation, Kernel, KernelReport, LanguageModel, Review, Run
from problems.models import Hardware, Problem, ProblemSet


class World:
    """One problem set (4 level-1 problems, 1 level-2 problem), one hardware, one run."""

    def __init__(self) -> None:
        self.problem_set = ProblemSet.objects.create(name="S", slug="s")
        self.problems = [
            Problem.objects.create(problem_set=self.problem_set, level=1, number=n, name=f"P{n}", source="x")
            for n in range(1, 5)
        ]
        self.level2 = Problem.objects.create(problem_set=self.problem_set, level=2, number=1, name="Q", source="x")
        self.hardware = Hardware.objects.create(slug="h200", name="H200")
        self.model = LanguageModel.objects.create(name="M")
        self.run = self.new_run(self.model)

    def new_run(self, model: LanguageModel, origin: str = "measured") -> Run:
        return Run.objects.create(model=model, problem_set=self.problem_set, hardware=self.hardware, origin=origin)

    def kernel(
        self,
        problem: Problem,
        *,
        run: Run | None = None,
        sample: int = 0,
        correct: bool = True,
        speedup: float | None = 1.5,
        flags: tuple[str, ...] = (),
        notes: tuple[str, ...] = (),
        origin: str = "measured",
        finished_at: dt.datetime | None = None,
    ) -> Kernel:
        kernel = Kernel.objects.create(
            run=run or self.run, problem=problem, sample_index=sample, source="class ModelNew: pass"
        )
        self.evaluate(
            kernel, correct=correct, speedup=speedup, flags=flags, notes=notes, origin=origin, finished_at=finished_at
        )
        return kernel

    def evaluate(
        self,
        kernel: Kernel,
        *,
        correct: bool = True,
        speedup: float | None = 1.5,
        flags: tuple[str, ...] = (),
        notes: tuple[str, ...] = (),
        origin: str = "measured",
        finished_at: dt.datetime | None = None,
    ) -> Evaluation:
        evaluation = Evaluation.objects.create(
            kernel=kernel,
            hardware=self.hardware,
            state="done",
            status="correct" if correct else "incorrect",
            compiled=True,
            correct=correct,
            speedup=speedup if correct else None,
            origin=origin,
            flags=[{"code": code, "message": f"{code} says so"} for code in flags],
            notes=[{"code": code, "message": f"{code} noted"} for code in notes],
            finished_at=finished_at or timezone.now(),
        )
        kernel.latest_evaluation = evaluation
        kernel.save(update_fields=["latest_evaluation"])
        return evaluation


def review(kernel: Kernel, reviewer, verdict: str, note: str = "", *, at: dt.datetime | None = None) -> Review:
    made = Review.objects.create(kernel=kernel, reviewer=reviewer, verdict=verdict, note=note)
    if at is not None:
        Review.objects.filter(pk=made.pk).update(created_at=at)
        _backdated(kernel)
    return made


def report(kernel: Kernel, reporter, reason: str = "looks too fast", *, at: dt.datetime | None = None) -> KernelReport:
    made = KernelReport.objects.create(kernel=kernel, reporter=reporter, reason=reason)
    if at is not None:
        KernelReport.objects.filter(pk=made.pk).update(created_at=at)
        _backdated(kernel)
    return made


def _backdated(kernel: Kernel) -> None:
    """A bulk update sends no signal: store the kernel's review state again, as a bulk writer must."""
    board_rescoring.refresh_kernel_states([kernel.pk])
    board_marks.mark_runs([kernel.run_id])


@pytest.fixture(name="world")
def world_fixture(db) -> World:
    """Import `world_fixture` into a test module to use the `world` fixture."""
    return World()


@pytest.fixture(autouse=True)
def _plain_static_files(settings) -> None:
    """Pages render without a collected static manifest (autouse where a test module imports it)."""
    settings.STORAGES = {
        **settings.STORAGES,
        "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    }
