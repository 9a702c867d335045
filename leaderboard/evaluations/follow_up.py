"""The reviewer's instruments run after the verdict, so that neither a verdict nor its timing waits
for them: owed, enqueued, claimed, then merged into the evaluation or dropped.

An evaluation on hardware whose kind is in EVAL_INSTRUMENTS_LATER runs with the instruments off
(`without_instruments`), and its verdict is stored at once. Where the stored result is one the
instruments are for (`owed`: correct, and not surely slower by the library's own rule,
evaluation.instruments.scope), the same transaction marks them owed and, on commit, a follow-up job
goes on the hardware's `instruments-<slug>` queue, which a worker takes only when its evaluation
queues are empty (evalworker lists it last). The follow-up (jobs.run_instruments_job) runs the
library again with no timing, one correctness trial and the instruments on, judging the stored
figures (`follow_up_config`), and `merge` adds what they found to the evaluation.

`instruments_state`:

    "" (inline, or not owed)
    QUEUED --merge()--> DONE
       +--a later evaluation of the kernel measured on that hardware--> DROPPED (nothing merged)
       +--its EVAL_MAX_ATTEMPTS claims used up--> FAILED (each instrument recorded as not run, with why)

Faults, as an evaluation's: each claim counts an attempt (one conditional update), so a follow-up
that kills its worker every time ends FAILED; the sweep (sweep.reenqueue_lost_follow_ups) enqueues
again an owed follow-up whose job Redis does not hold (a failure on our side, a dead work horse,
Redis lost). Two copies may run; one merges: `merge` re-checks under a lock that the row still owes
them for the same verdict.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import F, Q

from evaluation import EarlierTiming, EvaluationConfig
from evaluation.instruments.scope import surely_slower
from evaluation.results.types import INSTRUMENTS
from leaderboard.evaluations.attempts import finite_json
from leaderboard.evaluations.queue import RESULT_TTL, eval_queue
from leaderboard.models import Evaluation, Origin
from problems.models import Hardware

log = logging.getLogger(__name__)

JOB_FUNCTION = "leaderboard.evaluations.jobs.run_instruments_job"
#: The flag that tells reviewers the follow-up's own correctness pass disagreed with the stored verdict.
VERDICT_DIFFERS = "instruments_verdict_differs"
Owed = Evaluation.Instruments


def defers_instruments(hardware: Hardware) -> bool:
    """Whether evaluations on `hardware` run their instruments later (EVAL_INSTRUMENTS_LATER)."""
    return hardware.kind in settings.EVAL_INSTRUMENTS_LATER


def without_instruments(config: EvaluationConfig) -> EvaluationConfig:
    return dataclasses.replace(config, instruments=frozenset())


def owe_if_due(ev: Evaluation, floor: float | None) -> None:
    """In the verdict's transaction, before its save: mark the instruments owed where the stored
    result is one they are for, and enqueue the follow-up once that commits."""
    if not ev.correct or surely_slower(floor, ev.speedup, _interval(ev)):
        return
    ev.instruments_state, ev.instruments_attempts = Owed.QUEUED, 0
    pk = ev.pk
    transaction.on_commit(lambda: enqueue_follow_up(pk))


def _interval(ev: Evaluation) -> tuple[float, float] | None:
    return (ev.speedup_low, ev.speedup_high) if ev.speedup_low is not None and ev.speedup_high is not None else None


def follow_up_job_id(evaluation_id: int, claim: int) -> str:
    """The RQ job id of the follow-up's `claim`-th try (stable: a re-enqueue reuses it)."""
    return f"instruments-{evaluation_id}-{claim}"


def enqueue_follow_up(evaluation_id: int) -> bool:
    """Put the owed follow-up on its hardware's instruments queue; never raises for Redis trouble (the
    sweep enqueues it later). True when the job is in Redis."""
    ev = Evaluation.objects.select_related("hardware").filter(pk=evaluation_id, instruments_state=Owed.QUEUED).first()
    if ev is None:
        return False
    queue_name = ev.hardware.instruments_queue_name
    try:
        eval_queue(queue_name).enqueue(
            JOB_FUNCTION,
            args=(evaluation_id, ev.attempts),  # the verdict they are for: a re-run row must not get them
            job_id=follow_up_job_id(evaluation_id, ev.instruments_attempts + 1),
            job_timeout=settings.EVAL_JOB_TIMEOUT,
            result_ttl=RESULT_TTL,
            description=f"instruments of evaluation {evaluation_id}",
        )
    except Exception as exc:
        log.warning("could not enqueue the instruments of evaluation %s (%s); the sweep will retry", evaluation_id, exc)
        return False
    return True


def _owing(evaluation_id: int, verdict_attempt: int) -> Q:
    return Q(pk=evaluation_id, state=Evaluation.State.DONE, attempts=verdict_attempt, instruments_state=Owed.QUEUED)


def claim(evaluation_id: int, verdict_attempt: int) -> bool:
    """Count one try of the follow-up (conditional update); False when they are no longer owed for
    that verdict, or when its tries are used up (then FAILED, each instrument recorded as not run)."""
    owing = _owing(evaluation_id, verdict_attempt)
    if Evaluation.objects.filter(owing, instruments_attempts__lt=settings.EVAL_MAX_ATTEMPTS).update(
        instruments_attempts=F("instruments_attempts") + 1
    ):
        return True
    with transaction.atomic():
        ev = Evaluation.objects.select_for_update().filter(owing).first()
        if ev is not None:
            why = f"not run: the instruments' follow-up failed {ev.instruments_attempts} times on our side"
            ev.instruments = {**{name: {"skipped": why} for name in sorted(INSTRUMENTS)}, **ev.instruments}
            ev.instruments_state = Owed.FAILED
            ev.save(update_fields=["instruments", "instruments_state"])
            log.warning("evaluation %s: %s", evaluation_id, why)
    return False


def follow_up_config(config: EvaluationConfig, evaluation_id: int) -> EvaluationConfig:
    """The evaluation's own config, for the instruments alone: no timing, one correctness trial, the
    stored verdict's figures in place of a timing."""
    ev = Evaluation.objects.get(pk=evaluation_id)
    earlier = EarlierTiming(
        speedup=ev.speedup,
        speedup_interval=_interval(ev),
        kernel_ms=ev.kernel_ms,
        reference_ms=ev.reference_ms,
        flags=tuple(ev.flags),
    )
    return dataclasses.replace(config, timing_trials=0, correctness_trials=1, earlier_timing=earlier)


def superseded(ev: Evaluation) -> bool:
    """A later evaluation of the kernel measured on the same hardware (queued, running or done)."""
    later = Evaluation.objects.filter(kernel_id=ev.kernel_id, hardware_id=ev.hardware_id, pk__gt=ev.pk)
    return later.exclude(origin=Origin.IMPORTED).exists()


def drop_if_superseded(evaluation_id: int, verdict_attempt: int) -> bool:
    """DROPPED, and True, when a later evaluation of the kernel came first while they were owed."""
    with transaction.atomic():
        ev = Evaluation.objects.select_for_update().filter(_owing(evaluation_id, verdict_attempt)).first()
        if ev is None or not superseded(ev):
            return False
        ev.instruments_state = Owed.DROPPED
        ev.save(update_fields=["instruments_state"])
    log.info("evaluation %s: a later evaluation came first; its instruments dropped", evaluation_id)
    return True


def merge(evaluation_id: int, verdict_attempt: int, data: dict[str, Any]) -> bool:
    """Add what the follow-up found to the evaluation, in one transaction (its save marks the
    kernel's board, as any write of its flags does): the instruments' record, the flags the stored
    verdict lacks, a flag where its verdict differs, its seconds. False, nothing merged, when the
    row no longer owes them for that verdict or a later evaluation came first (then DROPPED)."""
    with transaction.atomic():
        ev = Evaluation.objects.select_for_update().filter(_owing(evaluation_id, verdict_attempt)).first()
        if ev is None:
            return False
        if superseded(ev):
            ev.instruments_state = Owed.DROPPED
            ev.save(update_fields=["instruments_state"])
            return False
        ev.instruments = {
            **finite_json(data.get("instruments") or {}),
            **ev.instruments,
        }  # the verdict's tolerance record stays
        ev.flags = [*ev.flags, *_new_flags(ev, data)]
        ev.stage_seconds = {**ev.stage_seconds, **_follow_up_seconds(data)}
        ev.instruments_state = Owed.DONE
        ev.save(update_fields=["instruments", "flags", "stage_seconds", "instruments_state"])
    return True


def _new_flags(ev: Evaluation, data: dict[str, Any]) -> list[dict[str, str]]:
    """The follow-up's flags the stored verdict lacks, and VERDICT_DIFFERS where its own correctness
    pass disagreed: the stored verdict stands; a reviewer is told what differed."""
    have = set(ev.flag_codes)
    found = [f for f in data.get("flags") or [] if isinstance(f, dict) and f.get("code") not in have]
    status = data.get("status")
    if status != ev.status:
        error = (data.get("error") or "").strip()[:300]
        found.append(
            {
                "code": VERDICT_DIFFERS,
                "message": (
                    f"The instruments' later run of this kernel found it {status} where its verdict says {ev.status}"
                    + (f" ({error})" if error else "")
                    + "; the verdict stands, from its own run."
                ),
            }
        )
    return found


def _follow_up_seconds(data: dict[str, Any]) -> dict[str, float]:
    """`eval_instruments`, the instruments' own seconds (the name the inline stage has, so that the
    GPU check's share still counts them), and `instruments_later_total`, the whole follow-up's."""
    timings = data.get("timings_s") or {}
    seconds = {"eval_instruments": timings.get("instruments"), "instruments_later_total": timings.get("total")}
    return {key: round(float(value), 4) for key, value in seconds.items() if isinstance(value, (int, float))}
