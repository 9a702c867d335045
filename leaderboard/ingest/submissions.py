"""Submitting one kernel for evaluation here: the API's /submissions/ and the problem page's form.

A kernel goes into a run: the one given (the submitter's own, or any for an admin; evaluated on the
run's hardware only), or the submitter's run of submissions of the model for the problem's set on
that hardware (made on first use). Then request_evaluation queues it on the hardware's queue.
"""

from __future__ import annotations

import re

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Max

from leaderboard.evaluations.queue import request_evaluation
from leaderboard.evaluations.quotas import check_source_bytes
from leaderboard.models import (
    WRITE_ANY_RUN,
    Author,
    Evaluation,
    Kernel,
    LanguageModel,
    Origin,
    Run,
    WriteRecord,
    acting_user,
    utf8_size,
)
from problems.models import Hardware, Problem

MODEL_NEW = re.compile(r"^\s*class\s+ModelNew\b", re.MULTILINE)
SUBMISSIONS_RUN_NAME = "submissions"
# Who may submit a kernel (the page form and the API check the same permission).
SUBMIT_PERMISSION = "leaderboard.add_kernel"


class SubmissionError(ValueError):
    def __init__(self, message: str, field: str | None = None):
        super().__init__(message)
        self.field = field


def check_source(source: str) -> None:
    """A kernel's source must fit the cap, be text, and define KernelBench's `class ModelNew`."""
    size = utf8_size(source)
    limit = settings.KERNEL_SOURCE_MAX_BYTES
    if size > limit:
        raise SubmissionError(f"source is {size} bytes; the limit is {limit} bytes", "source")
    if "\x00" in source:
        raise SubmissionError("source contains a NUL character", "source")
    try:
        source.encode("utf-8")
    except UnicodeEncodeError:
        raise SubmissionError("source is not valid Unicode text", "source") from None
    if not source.strip():
        raise SubmissionError("source is empty", "source")
    if not MODEL_NEW.search(source):
        raise SubmissionError("source defines no `class ModelNew` (KernelBench's name for the solution)", "source")


def check_target(
    problem: Problem, hardware: Hardware | None, model: LanguageModel | None, run: Run | None, user=None
) -> Hardware:
    """Exactly one of model or run; a run must belong to the problem's set, be measured here, be
    `user`'s to write into (Run.writable_by), and its hardware is the only one its kernels are
    evaluated on. Returns the hardware to evaluate on."""
    if (model is None) == (run is None):
        raise SubmissionError("give exactly one of model or run")
    if run is not None:
        if run.problem_set_id != problem.problem_set_id:
            raise SubmissionError(
                f"run {run.pk} is on problem set {run.problem_set.slug}, not {problem.problem_set.slug}", "run"
            )
        if run.origin != Origin.MEASURED:
            raise SubmissionError(f"run {run.pk} was imported; submit with a model instead", "run")
        if not run.writable_by(user):
            raise SubmissionError(
                f"run {run.pk} is not yours: only its creator or a user with the {WRITE_ANY_RUN} permission "
                "can add kernels to it; submit with a model instead",
                "run",
            )
        if hardware is not None and hardware.pk != run.hardware_id:
            raise SubmissionError(
                f"run {run.pk} is on {run.hardware.slug}: its kernels are evaluated there, not on {hardware.slug}",
                "hardware",
            )
        return run.hardware
    if hardware is None:
        raise SubmissionError("hardware is required when no run is given", "hardware")
    return hardware


def submissions_run(model: LanguageModel, problem: Problem, hardware: Hardware, setting: str, user) -> Run:
    """A step of submit_kernel (which records the write): `user`'s run of submissions of the model for the problem's set on `hardware`, made on first
    use (each user writes into runs of their own)."""
    model.lock()  # concurrent first submissions agree on one run
    run = (
        Run.objects.filter(
            model=model,
            problem_set=problem.problem_set,
            hardware=hardware,
            setting=setting,
            origin=Origin.MEASURED,
            name=SUBMISSIONS_RUN_NAME,
            created_by=user if getattr(user, "is_authenticated", False) else None,
        )
        .order_by("pk")
        .first()
    )
    if run is None:
        run = Run.objects.create(
            model=model,
            problem_set=problem.problem_set,
            hardware=hardware,
            setting=setting,
            origin=Origin.MEASURED,
            name=SUBMISSIONS_RUN_NAME,
            created_by=user,
        )
    return run


def _new_kernel(run: Run, problem: Problem, source: str, user) -> Kernel:
    """The next free sample of `problem` in `run` (retried if a concurrent submission took it)."""
    for _ in range(5):
        taken = Kernel.objects.filter(run=run, problem=problem).aggregate(n=Max("sample_index"))["n"]
        try:
            with transaction.atomic():
                return Kernel.objects.create(
                    run=run,
                    problem=problem,
                    sample_index=0 if taken is None else taken + 1,
                    source=source,
                    submitted_by=user,
                )
        except IntegrityError:
            continue
    raise SubmissionError("too many concurrent submissions for this run and problem; try again")


@transaction.atomic
def submit_kernel(
    *,
    problem: Problem,
    source: str,
    hardware: Hardware | None = None,
    model: LanguageModel | None = None,
    run: Run | None = None,
    setting: str = "submitted",
    by: Author,
) -> Evaluation:
    """`by` submits a kernel: save it and queue its evaluation (enqueued when the transaction commits). Raises
    SubmissionError for a bad source or target, QuotaExceeded past one of the user's quotas
    (nothing is written then)."""
    user = acting_user(by)
    check_source(source)
    hardware = check_target(problem, hardware, model, run, user)
    check_source_bytes(user, utf8_size(source))
    if run is None:
        assert model is not None  # check_target insists on one of the two
        run = submissions_run(model, problem, hardware, setting or "submitted", user)
    kernel = _new_kernel(run, problem, source, user)
    WriteRecord.objects.note(by, "submit_kernel", kernel, summary=f"run {run.pk}, problem {problem.pk}")
    return request_evaluation(kernel, hardware, user)
