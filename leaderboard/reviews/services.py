"""The reviewer workflow: which kernels need a look, verdicts, reports, and exclusions.

Rules, in one place (the queue page, the kernel page, the API and the standings all read them):

- A kernel is **flagged** when its latest evaluation carries any flag from the scoring library, or
  one of the notes that call for a look (`REVIEW_NOTE_CODES`: PyTorch-only, try/except fallback).
- It is **reported** when a signed-in visitor reported it after its latest verdict (or it has no
  verdict yet).
- It is **high imported** when its latest evaluation was imported (unverified here) with a speedup
  above `REVIEW_SPEEDUP_THRESHOLD` (3x unless settings say otherwise).
- It is **high published** when someone else published a speedup for it (Kernel.published_speedup,
  e.g. KernelBench's original leaderboard) above `REVIEW_PUBLISHED_SPEEDUP_THRESHOLD` (10x: the
  scoring library's flag threshold): a claim that looks too good.
- It **needs review** (it is in the queue, it counts as "unreviewed" on leaderboard rows) when it
  is reported, or flagged or high imported with no verdict recorded since its latest evaluation, or
  high published with no verdict yet or none since its latest evaluation (so the claim is reviewed
  as a claim, and again once it is re-measured here).
  So a clean verdict takes it out; a fresh evaluation that is still suspicious brings it back; a
  "needs rerun" verdict parks it until the new evaluation lands.
- It is **excluded** when its latest verdict is reward hack or invalid: it leaves fast_p and every
  ranking, is never deleted, and its page says why. A later verdict (e.g. clean) brings it back.

Every verdict is kept (Review rows are only ever added); the latest one counts.
"""

from __future__ import annotations

import hashlib
import io
import re
import tokenize
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from django.core.exceptions import PermissionDenied
from django.db import NotSupportedError, transaction
from django.db.models import F, FloatField, Func

from evaluation.results.types import FLAG_CODES, NOTE_CODES
from leaderboard.evaluations.queue import request_evaluation
from leaderboard.models import (
    EXCLUDING_VERDICTS,
    REVIEW_NOTE_CODES,
    Evaluation,
    Kernel,
    KernelReport,
    Review,
    Run,
    WriteRecord,
    code_q,
)
from leaderboard.reads.instruments import FIGURE_LIMIT, SORT_FIGURES, figure

if TYPE_CHECKING:
    from django.contrib.auth.models import AbstractBaseUser, AnonymousUser

    from leaderboard.models import KernelQuerySet
    from problems.models import Hardware

REVIEW_PERMISSION = "leaderboard.add_review"
NOTE_MAX_LENGTH = 5000  # characters in a verdict's note, wherever a verdict is entered (form, API)


def can_review(user: AbstractBaseUser | AnonymousUser | None) -> bool:
    return bool(user is not None and user.is_authenticated and user.has_perm(REVIEW_PERMISSION))


A_MAKER = "an Ingestor"  # who made a run, as those who may not see usernames read it


def can_see_makers(user: AbstractBaseUser | AnonymousUser | None) -> bool:
    """Whether `user` sees the usernames of who made runs: staff and reviewers. Usernames of staff
    are not public (they name the accounts a guesser would try); everyone else reads A_MAKER."""
    return bool(user is not None and user.is_authenticated and (user.is_staff or can_review(user)))


def run_maker(user: AbstractBaseUser | AnonymousUser | None, run: Run) -> str | None:
    """Who made `run` as `user` may see it: the username (to staff, reviewers and the maker), A_MAKER
    to anyone else; None when the server made it."""
    if run.created_by_id is None:
        return None
    return run.created_by.get_username() if sees_maker(user, run.created_by_id) else A_MAKER


def sees_maker(user: AbstractBaseUser | AnonymousUser | None, maker_id: int) -> bool:
    """Whether `user` sees the username of the maker (user id `maker_id`) of a run (run_maker)."""
    return can_see_makers(user) or (user is not None and user.is_authenticated and user.pk == maker_id)


def can_read_raw_output(user: AbstractBaseUser | AnonymousUser | None, kernel: Kernel) -> bool:
    """Whether `user` may read a kernel's evaluation logs, error text and worker details
    (leaderboard/reads/disclosure.py says why they are not public): reviewers, admins, and whoever
    submitted the kernel or created its run."""
    return reads_raw_output(user, kernel.submitted_by_id, kernel.run.created_by_id)


def reads_raw_output(
    user: AbstractBaseUser | AnonymousUser | None, submitter_id: int | None, run_maker_id: int | None
) -> bool:
    """can_read_raw_output from the ids of the kernel's submitter and of its run's maker (for lists
    read as rows, with no kernel to hand)."""
    if user is None or not user.is_authenticated:
        return False
    if user.is_superuser or can_review(user):
        return True
    return user.pk in (submitter_id, run_maker_id)


def flag_choices() -> list[tuple[str, str]]:
    """Codes the queue filters by: every flag of the scoring library, then the review notes."""
    return [(code, text) for code, text in FLAG_CODES.items()] + [
        (code, NOTE_CODES.get(code, code)) for code in REVIEW_NOTE_CODES
    ]


# ---------------------------------------------------------------------------------------------
# the queue


QUEUE_SORTS: dict[str, str] = {
    "speedup": "speedup, highest first",
    "-speedup": "speedup, lowest first",
    "date": "newest first",
    "-date": "oldest first",
    # The reviewer's instruments (leaderboard.reads.instruments.SORT_FIGURES): most suspicious first.
    "sol": "share of the speed of light, highest first",
    "precision": "error against fp64 over the reference's, highest first",
    "margin": "share of the tolerance used, highest first",
    "busy": "GPU-busy share of the profile, lowest first",
}
# Instrument sorts: the figure's path in Evaluation.instruments, and whether the highest comes first.
INSTRUMENT_SORTS: dict[str, bool] = {"sol": True, "precision": True, "margin": True, "busy": False}
QUEUE_REASONS: dict[str, str] = {
    "flagged": "flagged by the scoring library",
    "reported": "reported by a visitor",
    "imported": "imported unverified with a high speedup",
    "published": "a published speedup above the flag threshold",
}


@dataclass
class QueueFilters:
    flag: str | None = None
    level: int | None = None
    model: str | None = None  # a LanguageModel slug
    reason: str | None = None
    sort: str = "date"


def review_queue(filters: QueueFilters | None = None) -> KernelQuerySet:
    """Kernels that need a look, filtered and sorted, with what a queue row shows."""
    filters = filters or QueueFilters()
    kernels = Kernel.objects.needing_review().select_related(
        "problem__problem_set", "run__model", "run__hardware", "latest_evaluation"
    )
    if filters.flag:
        kernels = kernels.filter(code_q(filters.flag))
    if filters.level is not None:
        kernels = kernels.filter(problem__level=filters.level)
    if filters.model:
        kernels = kernels.filter(run__model__slug=filters.model)
    if filters.reason == "flagged":
        kernels = kernels.filter(is_flagged=True)
    elif filters.reason == "reported":
        kernels = kernels.filter(is_reported=True)
    elif filters.reason == "imported":
        kernels = kernels.filter(is_high_imported=True)
    elif filters.reason == "published":
        kernels = kernels.filter(is_high_published=True)
    speedup = F("latest_speedup")  # stored with the review state (no join sort over the queue)
    date = F("review_queued_at")  # stored: Coalesce(latest report, evaluation, creation), indexed
    if filters.sort in INSTRUMENT_SORTS:
        value = _instrument_figure(filters.sort)
        return kernels.order_by(value.desc(nulls_last=True) if INSTRUMENT_SORTS[filters.sort]
                                else value.asc(nulls_last=True), "-pk")  # fmt: skip
    order = {
        "speedup": [speedup.desc(nulls_last=True)],
        "-speedup": [speedup.asc(nulls_last=True)],
        "date": [date.desc()],
        "-date": [date.asc()],
    }.get(filters.sort, [date.desc()])
    return kernels.order_by(*order, "-pk")


def queue_count_key(filters: QueueFilters) -> str:
    """What names the rows `review_queue(filters)` lists, for their cached count: the filters (the
    sort orders the rows, never changes which)."""
    return f"review-queue:{filters.flag}:{filters.level}:{filters.model}:{filters.reason}"


def _instrument_figure(name: str) -> JSONNumber:
    """The latest evaluation's figure for an instrument sort, as a number (NULL where not measured)."""
    return JSONNumber(F("latest_evaluation__instruments"), SORT_FIGURES[name])  # F: follows the relation


class JSONNumber(Func):
    """The value at ``path`` in a JSON column as a float: NULL where it is not a JSON number (a string,
    a bool, an object: what a kernel's process may have put in a record stored before the parent
    rebuilt it) or is past a float's range, so the cast never fails and such rows sort last.
    SQLite and PostgreSQL; the path's keys are the code's own (SORT_FIGURES), passed as parameters."""

    output_field = FloatField()

    def __init__(self, column: Any, path: tuple[str, ...]) -> None:
        super().__init__(column)
        self.path = path

    def as_sql(self, compiler, connection, **extra):
        raise NotSupportedError("JSONNumber needs SQLite or PostgreSQL")

    def as_postgresql(self, compiler, connection, **extra):
        column, params = compiler.compile(self.get_source_expressions()[0])
        value, value_params = f"({column} #> %s)", [*params, "{" + ",".join(self.path) + "}"]
        # CASE tests its conditions in order: no cast runs on a value that is not a number.
        return (
            f"CASE WHEN jsonb_typeof({value}) <> 'number' THEN NULL WHEN abs({value}::numeric) >= {FIGURE_LIMIT:.0e} "
            f"THEN NULL ELSE {value}::numeric::double precision END",
            value_params * 3,
        )

    def as_sqlite(self, compiler, connection, **extra):
        column, params = compiler.compile(self.get_source_expressions()[0])
        path = "$" + "".join(f'."{key}"' for key in self.path)
        return (
            f"CASE WHEN json_type({column}, %s) NOT IN ('integer', 'real') THEN NULL WHEN "
            f"abs(json_extract({column}, %s)) >= {FIGURE_LIMIT:.0e} THEN NULL ELSE json_extract({column}, %s) END",
            [*params, path] * 3,
        )


def queue_figures(kernel: Kernel) -> dict[str, float | None]:
    """The figures the queue sorts by, for one row (the API's queue rows)."""
    instruments = kernel.latest_evaluation.instruments if kernel.latest_evaluation else {}
    return {name: figure(instruments, name) for name in SORT_FIGURES}


# ---------------------------------------------------------------------------------------------
# verdicts and reports


@dataclass
class VerdictResult:
    review: Review
    evaluation: Evaluation | None = None  # the evaluation a "needs rerun" verdict queued


def rerun_hardware(kernel: Kernel) -> Hardware:
    """Where a rerun goes: the run's hardware, the only one its kernels are evaluated on."""
    return kernel.run.hardware


@transaction.atomic
def record_verdict(kernel: Kernel, verdict: str, note: str = "", *, by: AbstractBaseUser) -> VerdictResult:
    """`by` (a reviewer) adds a verdict (the kernel's earlier ones stay). "Needs rerun" queues a fresh
    evaluation (request_evaluation), unless one is already waiting for that kernel and hardware."""
    if not can_review(by):
        raise PermissionDenied("Recording a verdict needs the leaderboard.add_review permission.")
    if verdict not in Review.Verdict.values:
        raise ValueError(f"Unknown verdict {verdict!r}.")
    review = Review.objects.create(kernel=kernel, reviewer=by, verdict=verdict, note=note.strip())
    WriteRecord.objects.note(by, "record_verdict", review, summary=f"{verdict} on kernel {kernel.pk}")
    evaluation = None
    if verdict == Review.Verdict.RERUN:
        # The one already waiting, if any; a reviewer's rerun counts against no quota (user None).
        evaluation = request_evaluation(kernel, rerun_hardware(kernel))
    return VerdictResult(review, evaluation)


@dataclass
class ReportResult:
    report: KernelReport
    created: bool


def open_report_by(kernel: Kernel, user) -> KernelReport | None:
    """`user`'s report on `kernel` made after its latest verdict, if any."""
    reports = KernelReport.objects.filter(kernel=kernel, reporter=user)
    latest_review = kernel.reviews.order_by("-created_at", "-pk").first()
    if latest_review is not None:
        reports = reports.filter(created_at__gt=latest_review.created_at)
    return reports.order_by("-created_at").first()


@transaction.atomic
def report_kernel(kernel: Kernel, reason: str, *, by: AbstractBaseUser | AnonymousUser | None) -> ReportResult:
    """A signed-in user (`by`) reports `kernel`. One open report per user and kernel: reporting again
    before a reviewer has looked returns the open one (and writes nothing)."""
    if by is None or not by.is_authenticated:
        raise PermissionDenied("Sign in to report a kernel.")
    existing = open_report_by(kernel, by)
    if existing is not None:
        return ReportResult(existing, created=False)
    report = KernelReport.objects.create(kernel=kernel, reporter=by, reason=reason.strip())
    WriteRecord.objects.note(by, "report_kernel", report, summary=f"kernel {kernel.pk}")
    return ReportResult(report, True)


# ---------------------------------------------------------------------------------------------
# what the kernel page shows


@dataclass
class KernelReviewState:
    kernel: Kernel
    reviews: list[Review]  # the audit trail, newest first
    reports: list[KernelReport]  # newest first
    flags: list[dict] = field(default_factory=list)
    review_notes: list[dict] = field(default_factory=list)

    @property
    def latest(self) -> Review | None:
        return self.reviews[0] if self.reviews else None

    @property
    def excluded(self) -> bool:
        return self.latest is not None and self.latest.verdict in EXCLUDING_VERDICTS

    @property
    def exclusion(self) -> Review | None:
        """The verdict that takes the kernel out of the rankings, if one does."""
        return self.latest if self.excluded else None

    @property
    def open_reports(self) -> list[KernelReport]:
        since = self.latest.created_at if self.latest else None
        return [r for r in self.reports if since is None or r.created_at > since]


def kernel_review_state(kernel: Kernel) -> KernelReviewState:
    """Verdicts, reports, flags and exclusion of one kernel, in two queries."""
    reviews = list(kernel.reviews.select_related("reviewer").order_by("-created_at", "-pk"))
    reports = list(kernel.reports.select_related("reporter").order_by("-created_at", "-pk"))
    evaluation = kernel.latest_evaluation
    flags = [f for f in (evaluation.flags if evaluation else []) if isinstance(f, dict)]
    notes = [n for n in (evaluation.notes if evaluation else []) if isinstance(n, dict)]
    review_notes = [n for n in notes if n.get("code") in REVIEW_NOTE_CODES]
    return KernelReviewState(kernel, reviews, reports, flags, review_notes)


# ---------------------------------------------------------------------------------------------
# Verdicts that follow the code: a reviewed kernel re-imported with only comments or whitespace
# changed keeps its reviews and exclusion, rather than coming back unreviewed

_C_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.DOTALL)
_SPACE = re.compile(r"\s+")
_SKIPPED_TOKENS = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT}


def code_fingerprint(source: str) -> str:
    """A hash of a kernel's code with comments and whitespace left out: Python comments, and the
    C/CUDA comments inside its strings (the inline sources load_inline builds). Two kernels that
    differ only there have one fingerprint. Text Python cannot tokenize is hashed without whitespace."""
    try:
        tokens = tokenize.generate_tokens(io.StringIO(source).readline)
        parts = [
            _C_COMMENT.sub("", token.string) if token.type == tokenize.STRING else token.string
            for token in tokens
            if token.type not in _SKIPPED_TOKENS
        ]
    except (tokenize.TokenError, IndentationError, SyntaxError):
        parts = [source]
    return hashlib.sha256(_SPACE.sub("", "".join(parts)).encode("utf-8", "replace")).hexdigest()


def inherit_exclusions(kernels: list[Kernel]) -> int:
    """Give each new kernel the excluding verdict (reward hack, invalid) of a kernel of the same
    problem whose latest verdict excludes it and whose code has the same fingerprint: a kernel
    judged a hack, re-imported with only a comment changed, stays out of the rankings. The verdict
    is copied (same reviewer and verdict, a note naming the kernel it came from) and so is audited
    like any other. A clean verdict is not inherited: it covers the evaluation it was given for,
    and a new claim gets its own look. Returns how many kernels inherited one."""
    kernels = [kernel for kernel in kernels if kernel.source]  # a withheld source (its hash only) has no code to match
    problems = {kernel.problem_id for kernel in kernels}
    if not problems:
        return 0
    judged = Review.objects.filter(kernel__problem_id__in=problems, verdict__in=EXCLUDING_VERDICTS)
    latest: dict[int, Review] = {}
    for review in Review.objects.filter(kernel_id__in=judged.values("kernel_id")).order_by("-created_at", "-pk"):
        latest.setdefault(review.kernel_id, review)
    excluded = {pk: review for pk, review in latest.items() if review.verdict in EXCLUDING_VERDICTS}
    if not excluded:
        return 0
    new_ids = {kernel.pk for kernel in kernels}
    by_code = {
        (kernel.problem_id, code_fingerprint(kernel.source)): excluded[kernel.pk]
        for kernel in Kernel.objects.filter(pk__in=set(excluded) - new_ids)
        .exclude(source="")
        .only("pk", "problem_id", "source")
    }
    inherited = []
    for kernel in kernels:
        found = by_code.get((kernel.problem_id, code_fingerprint(kernel.source)))
        if found is not None:
            note = (f"Inherited from kernel {found.kernel_id}'s verdict (the same code once comments and whitespace "
                    f"are ignored). {found.note}").strip()  # fmt: skip
            inherited.append(Review(kernel=kernel, reviewer_id=found.reviewer_id, verdict=found.verdict, note=note))
    Review.objects.bulk_create(inherited)
    return len(inherited)
