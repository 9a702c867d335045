"""Measured results that travel without code (the design's contract): `export_results` writes
finished evaluations as JSON lines, `import_results` stores them back into any instance.

A line is one evaluation, keyed by what identifies its kernel and the conditions it was measured
under, never by database ids:

    {"kernel": {"source_hash", "problem_set", "level", "problem", "problem_hash", "model", "sample"},
     "hardware": {"slug", "name", "kind", "device_name", ...}, "rules": {"slug", ...},
     "evaluation": {"status", "compiled", "correct", "speedup", "speedup_low", "speedup_high",
                    "kernel_ms", "reference_ms", timings, diffs, trials, "flags", "notes",
                    "stage_seconds", "environment", "origin", "queued_at", "started_at", "finished_at"}}

The first line is a header ({"format": FORMAT, ...}). No kernel code, no problem text, no logs,
no error text, no worker names: figures and the public environment only (the keys the site shows
everyone: leaderboard.reads.disclosure.public_environment; not the sandbox's uids, hidden paths or
cache paths).

Importing checks each line's figures (types, ranges; flags and notes are short lists of
{code, message}; the environment a small object) and attaches it to every stored kernel with that source hash, of that problem (set
slug, level, number, and the same problem text by hash), whose run is on that hardware; it never
creates a kernel. A line whose evaluation is already stored (same kernel, hardware, rules and
finish time) is skipped, so importing the same file twice changes nothing. Each kernel touched
then points at its newest evaluation by the worker's own rule (attempts.refresh_latest_evaluation).
"""

from __future__ import annotations

import datetime as dt
import json
import math
import re
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from django.db import transaction
from django.utils.dateparse import parse_datetime

from evaluation.metrics import MIN_RUNTIME_MS, speedup_problem
from leaderboard.evaluations.attempts import refresh_latest_evaluation
from leaderboard.models import Evaluation, Kernel, Origin
from leaderboard.reads.disclosure import public_environment
from problems.models import RULE_PRESETS, Hardware, ScoringRules

FORMAT = "kernelbench-results/1"
FIGURES = (
    "status", "compiled", "correct", "speedup", "speedup_low", "speedup_high", "kernel_ms", "reference_ms",
    "kernel_timing", "reference_timing", "max_abs_diff", "max_rel_diff", "trials_passed", "trials_total",
    "flags", "notes", "stage_seconds", "environment",
)  # fmt: skip
TIMES = ("queued_at", "started_at", "finished_at")
HARDWARE_FIELDS = (
    "slug",
    "name",
    "kind",
    "device_name",
    "driver_version",
    "cuda_version",
    "torch_version",
    "python_version",
)
ORIGINS = {Origin.MEASURED.value, Origin.IMPORTED.value}  # demo rows never travel
# What an imported line's flags and notes may be: lists of {code, message}, each short.
MAX_MESSAGES, MESSAGE_CHARS = 50, 4000
MESSAGE_CODE = re.compile(r"[a-z][a-z0-9_]{0,63}")
MAX_ENVIRONMENT_BYTES = 16 * 1024


class MalformedResults(ValueError):
    """A line that is not a results record (names the line)."""


# ---------------------------------------------------------------------------------------------
# export


def exported(evaluations) -> Iterator[dict]:
    """The header, then one record per finished evaluation of `evaluations` (a queryset)."""
    yield {
        "format": FORMAT,
        "exported_at": dt.datetime.now(dt.UTC).isoformat(),
        "note": "figures only; no code, no logs",
    }
    rows = (
        evaluations.filter(state=Evaluation.State.DONE, origin__in=ORIGINS)
        .select_related("kernel__problem__problem_set", "kernel__run__model", "hardware", "rules")
        .order_by("kernel__problem__level", "kernel__problem__number", "kernel__source_hash", "finished_at", "pk")
    )
    for evaluation in rows.iterator(chunk_size=500):
        yield record(evaluation)


def record(evaluation: Evaluation) -> dict:
    kernel, problem = evaluation.kernel, evaluation.kernel.problem
    figures = {name: getattr(evaluation, name) for name in FIGURES}
    figures["environment"] = public_environment(evaluation.environment)  # what the site shows everyone
    figures.update({name: _iso(getattr(evaluation, name)) for name in TIMES}, origin=evaluation.origin)
    return {
        "kernel": {
            "source_hash": kernel.source_hash, "problem_set": problem.problem_set.slug, "level": problem.level,
            "problem": problem.number, "problem_hash": problem.source_hash, "model": kernel.run.model.name,
            "sample": kernel.sample_index,
        },
        "hardware": {name: getattr(evaluation.hardware, name) for name in HARDWARE_FIELDS},
        "rules": evaluation.rules.as_dict() if evaluation.rules_id else None,
        "evaluation": figures,
    }  # fmt: skip


def _iso(value: dt.datetime | None) -> str | None:
    return value.isoformat() if value else None


def write_jsonl(records: Iterable[dict], handle) -> int:
    """Write the records one a line; how many evaluations (the header not counted)."""
    lines = 0
    for item in records:
        handle.write(json.dumps(item, sort_keys=True, allow_nan=False) + "\n")
        lines += 1
    return max(lines - 1, 0)


# ---------------------------------------------------------------------------------------------
# import


@dataclass
class ResultsImport:
    counts: Counter = field(default_factory=Counter)  # created, already stored, and each reason to skip
    kernels: set[int] = field(default_factory=set)  # kernels that got an evaluation

    def summary(self) -> str:
        parts = [f"{self.counts['created']} evaluation(s) stored on {len(self.kernels)} kernel(s)"]
        parts += [f"{n} {reason}" for reason, n in sorted(self.counts.items()) if reason != "created"]
        return "; ".join(parts)


def read_jsonl(lines: Iterable[str]) -> list[dict]:
    """The records of a results file (header checked, blank lines ignored); MalformedResults."""
    records, header = [], None
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except json.JSONDecodeError as exc:
            raise MalformedResults(f"line {number}: not JSON: {exc.msg}") from None
        if header is None:
            if not isinstance(item, dict) or item.get("format") != FORMAT:
                raise MalformedResults(f"line {number}: not a results file (its first line must say format {FORMAT})")
            header = item
            continue
        _check(item, number)
        records.append(item)
    return records


def _check(item, number: int) -> None:
    where = f"line {number}"
    if not isinstance(item, dict) or not all(
        isinstance(item.get(k), dict) for k in ("kernel", "hardware", "evaluation")
    ):
        raise MalformedResults(f"{where}: must hold kernel, hardware and evaluation objects")
    figures = item["evaluation"]
    if figures.get("status") not in Evaluation.Status.values or figures.get("origin") not in ORIGINS:
        raise MalformedResults(f"{where}: status or origin is not one of ours")
    for name in ("speedup", "speedup_low", "speedup_high", "kernel_ms", "reference_ms"):
        value = figures.get(name)
        if value is not None and (
            isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0
        ):
            raise MalformedResults(f"{where}: {name} {value!r} is not a positive number")
        # Issue 28, case 1: the same floor and ceiling as every other way in (run_import, the API, the worker).
        wrong = (speedup_problem(value) or "").replace("speedup", name, 1) if name.startswith("speedup") else ""
        if name.endswith("_ms") and value is not None and value < MIN_RUNTIME_MS:
            wrong = f"{name} {value!r} ms is under the physical floor of {MIN_RUNTIME_MS:g} ms"
        if wrong:
            raise MalformedResults(f"{where}: {wrong}")
    if figures.get("speedup") is not None and figures.get("correct") is not True:
        raise MalformedResults(f"{where}: a speedup for a kernel that is not correct")
    if not isinstance(figures.get("finished_at"), str) or parse_datetime(figures["finished_at"]) is None:
        raise MalformedResults(f"{where}: finished_at must be an ISO date and time")
    _check_lists(figures, where)


def _is_message(item) -> bool:
    return (isinstance(item, dict) and set(item) == {"code", "message"} and isinstance(item["code"], str)
            and MESSAGE_CODE.fullmatch(item["code"]) is not None and isinstance(item["message"], str)
            and len(item["message"]) <= MESSAGE_CHARS)  # fmt: skip


def _check_lists(figures: dict, where: str) -> None:
    """Flags and notes: lists of {code, message}; the environment: an object of bounded size."""
    for name in ("flags", "notes"):
        value = figures.get(name)
        if value is not None and (not isinstance(value, list) or len(value) > MAX_MESSAGES
                                  or not all(_is_message(item) for item in value)):  # fmt: skip
            raise MalformedResults(
                f"{where}: {name} must be a list of at most {MAX_MESSAGES} {{code, message}} objects (a code of "
                f"lower-case letters, digits and _ up to 64 characters; a message up to {MESSAGE_CHARS})"
            )
    environment = figures.get("environment")
    if environment is not None and (
        not isinstance(environment, dict) or len(json.dumps(environment)) > MAX_ENVIRONMENT_BYTES
    ):
        raise MalformedResults(f"{where}: environment must be an object of at most {MAX_ENVIRONMENT_BYTES} bytes")


@transaction.atomic
def import_records(records: list[dict]) -> ResultsImport:
    """Store every record on the kernels it belongs to (see the module's docstring)."""
    result = ResultsImport()
    hardware: dict[str, Hardware] = {}
    for item in records:
        slug = str(item["hardware"].get("slug", ""))
        if slug not in hardware:
            hardware[slug] = _hardware(item["hardware"])
        rules = _rules(item.get("rules"))
        if rules is False:
            result.counts["skipped: rules unknown here"] += 1
            continue
        kernels = _kernels(item["kernel"], hardware[slug])
        if not kernels:
            result.counts["skipped: no kernel with that source hash and problem here"] += 1
            continue
        for kernel in kernels:
            outcome = _store(kernel, hardware[slug], rules, item["evaluation"])
            result.counts[outcome] += 1
            if outcome == "created":
                result.kernels.add(kernel.pk)
    for kernel_id in sorted(result.kernels):
        refresh_latest_evaluation(kernel_id)
    return result


def _hardware(fields: dict) -> Hardware:
    slug = str(fields.get("slug", ""))[: Hardware.SLUG_LENGTH]
    if not slug:
        raise MalformedResults("a record names no hardware slug")
    found = Hardware.objects.filter(slug=slug).first()
    if found is None:  # hardware is not code: a record may bring its own
        values = {name: str(fields.get(name) or "") for name in HARDWARE_FIELDS if name != "slug"}
        values["kind"] = values["kind"] if values["kind"] in Hardware.Kind.values else Hardware.Kind.GPU
        found = Hardware.objects.create(slug=slug, **{k: v[:200] for k, v in values.items()})
    return found


def _rules(fields) -> ScoringRules | None | bool:
    """The stored rules the record names (a preset is made on first use); None when the record has
    none; False when it names rules this instance does not have."""
    if not fields:
        return None
    slug = str(fields.get("slug", ""))
    if slug in RULE_PRESETS:
        return ScoringRules.objects.preset(slug)
    return ScoringRules.objects.filter(slug=slug).first() or False


def _kernels(key: dict, hardware: Hardware) -> list[Kernel]:
    kernels = Kernel.objects.filter(
        source_hash=str(key.get("source_hash", "")),
        problem__problem_set__slug=str(key.get("problem_set", "")),
        problem__level=key.get("level"),
        problem__number=key.get("problem"),
        run__hardware=hardware,
    ).select_related("problem")
    wanted = key.get("problem_hash")
    return [kernel for kernel in kernels if not wanted or kernel.problem.source_hash == wanted]


def _store(kernel: Kernel, hardware: Hardware, rules: ScoringRules | None, figures: dict) -> str:
    times = {name: parse_datetime(figures[name]) if figures.get(name) else None for name in TIMES}
    stored = Evaluation.objects.filter(kernel=kernel, hardware=hardware, rules=rules, finished_at=times["finished_at"])
    if stored.exists():
        return "already stored"
    values = {name: figures.get(name) for name in FIGURES}
    values = {name: value for name, value in values.items() if value is not None}
    evaluation = Evaluation.objects.create(
        kernel=kernel, hardware=hardware, rules=rules, origin=figures["origin"], state=Evaluation.State.DONE,
        started_at=times["started_at"], finished_at=times["finished_at"], **values,
    )  # fmt: skip
    if times["queued_at"]:  # auto_now_add set it to now: keep when it was asked for
        Evaluation.objects.filter(pk=evaluation.pk).update(queued_at=times["queued_at"])
    return "created"
