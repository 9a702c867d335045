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

Importing reads each line as strict JSON (a duplicate key, NaN or Infinity refused) and checks it as
strictly as the API checks what it takes: the key (a sha256, a level 1-4, whole numbers a column holds;
no number anywhere beyond a bigint), the figures (positive, finite, normal numbers within the floor and
ceiling; the speedup its own times' ratio), the times (zoned, from 2024 to now, started before
finished), flags and notes (short lists of {code, message}), the environment (a small object). Every
line that is wrong is named with its reason, and nothing is imported then. A good line is attached
to every stored kernel with that source hash, of that problem (set slug, level, number, and the same
problem text by hash), whose run is on that hardware; it never
creates a kernel. A line whose evaluation is already stored (same kernel, hardware, rules and
finish time) is skipped, so importing the same file twice changes nothing. Each kernel touched
then points at its newest evaluation by the worker's own rule (attempts.refresh_latest_evaluation).
"""

from __future__ import annotations

import datetime as dt
import json
import math
import re
import sys
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from django.db import transaction
from django.utils.dateparse import parse_datetime

from evaluation.results.metrics import MIN_RUNTIME_MS, speedup_problem
from leaderboard.evaluations.attempts import refresh_latest_evaluation
from leaderboard.ingest.uploads import strict_json
from leaderboard.models import Author, Evaluation, Kernel, Origin, WriteRecord
from leaderboard.reads.disclosure import public_environment
from problems.models import DB_INT_MAX, RULE_PRESETS, Hardware, ScoringRules
from problems.text import control_character_problem

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
MAX_ERRORS_SHOWN = 50
# What a record is matched by, and the largest whole number any column holds (bigint).
SOURCE_HASH = re.compile(r"[0-9a-f]{64}")
HARDWARE_SLUG = re.compile(rf"[-a-zA-Z0-9_]{{1,{Hardware.SLUG_LENGTH}}}")
DB_BIGINT_MAX = 2**63 - 1
TIMINGS = ("reference_timing", "kernel_timing")
# A speedup is its times' ratio: the worker divides the interquartile means (evaluation.results.stats.central)
# of the rounds, and stores them in the timings, so only rounding separates them. Medians are not the
# estimator: on rounds in two modes they differ from it by up to the modes' gap (docs/evaluation.md).
SPEEDUP_TOLERANCE, MEDIAN_TOLERANCE = 0.01, 0.10
# Times: none before KernelBench existed, none later than now beyond the skew between two hosts' clocks.
EARLIEST = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
CLOCK_SKEW = dt.timedelta(hours=1)


class MalformedResults(ValueError):
    """A results file that is not imported: every line that is wrong, each named with its reason."""

    def __init__(self, errors: list[str] | str):
        self.errors = [errors] if isinstance(errors, str) else errors
        shown = self.errors[:MAX_ERRORS_SHOWN]
        more = len(self.errors) - len(shown)
        super().__init__("; ".join(shown) + (f"; and {more} more" if more else ""))


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
        "rules": evaluation.rules.as_dict(evaluation.hardware.kind) if evaluation.rules_id else None,
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
    """The records of a results file (header checked, blank lines ignored). MalformedResults naming
    every line that is wrong and why; nothing is imported when one is."""
    records: list[dict] = []
    errors: list[str] = []
    header = None
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            item = _parse(line)
            if header is None:
                if not isinstance(item, dict) or item.get("format") != FORMAT:
                    raise MalformedResults(f"not a results file (its first line must say format {FORMAT})")
                header = item
                continue
            _check(item)
        except ValueError as exc:  # MalformedResults and strict_json's refusals
            errors.append(f"line {number}: {exc}")
            if header is None:
                break
            continue
        records.append(item)
    if errors:
        raise MalformedResults(errors)
    return records


def _parse(line: str):
    """One line as strict JSON (ingest.uploads.strict_json): a duplicate key, NaN or Infinity is
    refused, never read as the last value or a number."""
    try:
        return strict_json(line)
    except json.JSONDecodeError as exc:
        raise MalformedResults(f"not JSON: {exc.msg}") from None
    except ValueError as exc:
        raise MalformedResults(f"not strict JSON: {exc}") from None


def _check(item) -> None:
    """MalformedResults saying what is wrong with one record (the reader adds its line)."""
    if not isinstance(item, dict) or not all(
        isinstance(item.get(k), dict) for k in ("kernel", "hardware", "evaluation")
    ):
        raise MalformedResults("must hold kernel, hardware and evaluation objects")
    if found := _huge_integer(item):
        raise MalformedResults(f"{found} is out of range (a whole number of at most {DB_BIGINT_MAX})")
    _check_key(item["kernel"], item["hardware"])
    figures = item["evaluation"]
    if figures.get("status") not in Evaluation.Status.values or figures.get("origin") not in ORIGINS:
        raise MalformedResults("status or origin is not one of ours")
    _check_figures(figures)
    _check_speedup(figures)
    _check_times(figures)
    _check_lists(figures)


def _huge_integer(value, path: str = "") -> str | None:
    """The path of the first whole number in `value` no database column could hold, or None
    (iteratively: strict_json has bounded the nesting already)."""
    stack = [(path, value)]
    while stack:
        where, item = stack.pop()
        if isinstance(item, int) and not isinstance(item, bool) and abs(item) > DB_BIGINT_MAX:
            return f"{where or 'a value'} ({str(item)[:20]}{'...' if len(str(item)) > 20 else ''})"
        if isinstance(item, dict):
            stack.extend((f"{where}.{key}" if where else str(key)[:40], child) for key, child in item.items())
        elif isinstance(item, list):
            stack.extend((f"{where}[{i}]", child) for i, child in enumerate(item))
    return None


def _whole(value, low: int, high: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high


def _check_key(kernel: dict, hardware: dict) -> None:
    """What a record is matched by: a source hash, a problem (set slug, level 1-4, number), a
    sample; a hardware slug and short one-line descriptions of it."""
    if not isinstance(kernel.get("source_hash"), str) or not SOURCE_HASH.fullmatch(kernel["source_hash"]):
        raise MalformedResults("kernel.source_hash must be a sha256 in hex")
    if not isinstance(kernel.get("problem_set"), str) or not _whole(kernel.get("level"), 1, 4):
        raise MalformedResults("kernel.problem_set must be text and kernel.level 1 to 4")
    if not _whole(kernel.get("problem"), 0, DB_INT_MAX) or not (
        kernel.get("sample") is None or _whole(kernel["sample"], 0, DB_INT_MAX)
    ):
        raise MalformedResults(f"kernel.problem and kernel.sample must be whole numbers from 0 to {DB_INT_MAX}")
    if not isinstance(hardware.get("slug"), str) or not HARDWARE_SLUG.fullmatch(hardware["slug"]):
        raise MalformedResults(f"hardware.slug must be a slug of at most {Hardware.SLUG_LENGTH} characters")
    for name in HARDWARE_FIELDS:
        text = hardware.get(name)
        if text is not None and (not isinstance(text, str) or len(text) > 200 or control_character_problem(text)):
            raise MalformedResults(f"hardware.{name} must be one line of text of at most 200 characters")


def _check_figures(figures: dict) -> None:
    """Times and speedups: positive, finite, normal numbers within the floor and ceiling every
    other way in applies (run_import, the API, the worker); differences and counts not negative."""
    for name in ("speedup", "speedup_low", "speedup_high", "kernel_ms", "reference_ms"):
        value = figures.get(name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
            raise MalformedResults(f"{name} {value!r} is not a positive number")
        wrong = (speedup_problem(value) or "").replace("speedup", name, 1) if name.startswith("speedup") else ""
        if name.endswith("_ms") and value < MIN_RUNTIME_MS:
            wrong = f"{name} {value!r} ms is under the physical floor of {MIN_RUNTIME_MS:g} ms"
        if not wrong and value < sys.float_info.min:
            wrong = f"{name} {value!r} is a denormal number, not a measurement"
        if wrong:
            raise MalformedResults(wrong)
    for name in ("max_abs_diff", "max_rel_diff"):
        value = figures.get(name)
        if value is not None and not (_real(value) and (value == 0 or sys.float_info.min <= value)):
            raise MalformedResults(f"{name} {value!r} is not a finite, normal number of at least 0")
    trials = [figures.get(name) for name in ("trials_passed", "trials_total")]
    if not all(value is None or _whole(value, 0, DB_INT_MAX) for value in trials):
        raise MalformedResults(f"trials_passed and trials_total must be whole numbers from 0 to {DB_INT_MAX}")
    if figures.get("speedup") is not None and figures.get("correct") is not True:
        raise MalformedResults("a speedup for a kernel that is not correct")


def _real(value) -> bool:
    return not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value)


def _check_speedup(figures: dict) -> None:
    """The speedup must be the record's own times' ratio: the interquartile means of the timings
    when the record has them (the worker's estimator: within SPEEDUP_TOLERANCE), else the medians
    (reference_ms / kernel_ms, within MEDIAN_TOLERANCE: the medians are not the estimator), and
    inside an interval whose low end is not above its high end."""
    speedup = figures.get("speedup")
    low, high = figures.get("speedup_low"), figures.get("speedup_high")
    if low is not None and high is not None and low > high:
        raise MalformedResults(f"speedup_low {low!r} is above speedup_high {high!r}")
    if speedup is None:
        return
    timings = [figures.get(name) if isinstance(figures.get(name), dict) else {} for name in TIMINGS]
    iqm = [timing.get("iqm") for timing in timings]
    if all(_real(value) and value > 0 for value in iqm):
        ratio, tolerance, source = iqm[0] / iqm[1], SPEEDUP_TOLERANCE, "reference_timing.iqm / kernel_timing.iqm"
    elif figures.get("reference_ms") is not None and figures.get("kernel_ms") is not None:
        ratio, tolerance = figures["reference_ms"] / figures["kernel_ms"], MEDIAN_TOLERANCE
        source = "reference_ms / kernel_ms"
    else:
        raise MalformedResults("a speedup without the reference and kernel times it comes from")
    if abs(speedup / ratio - 1) > tolerance:
        raise MalformedResults(
            f"speedup {speedup:.4g} is not its own times' ratio ({source} is {ratio:.4g}; "
            f"the tolerance is {tolerance:.0%})"
        )


def _check_times(figures: dict) -> None:
    """ISO dates and times with their zone, none before EARLIEST nor later than now (give or take
    CLOCK_SKEW between hosts); an attempt started before it finished."""
    times = {}
    for name in TIMES:
        text = figures.get(name)
        if text is None and name != "finished_at":
            continue
        try:
            when = parse_datetime(text) if isinstance(text, str) else None
        except ValueError:  # the right shape, an impossible date (month 13)
            when = None
        if when is None or when.tzinfo is None:
            raise MalformedResults(f"{name} must be an ISO date and time with its zone")
        if not EARLIEST <= when <= dt.datetime.now(dt.UTC) + CLOCK_SKEW:
            raise MalformedResults(f"{name} {text[:40]!r} is before {EARLIEST:%Y} or in the future")
        times[name] = when
    # Not queued_at: an evaluation imported with its run is queued when it is imported, after the
    # times its source gives; an attempt's start and finish come from one clock.
    if "started_at" in times and times["started_at"] > times["finished_at"]:
        raise MalformedResults("started_at is after finished_at")


def _is_message(item) -> bool:
    return (isinstance(item, dict) and set(item) == {"code", "message"} and isinstance(item["code"], str)
            and MESSAGE_CODE.fullmatch(item["code"]) is not None and isinstance(item["message"], str)
            and len(item["message"]) <= MESSAGE_CHARS)  # fmt: skip


def _check_lists(figures: dict) -> None:
    """Flags and notes: lists of {code, message}; the environment: an object of bounded size."""
    for name in ("flags", "notes"):
        value = figures.get(name)
        if value is not None and (not isinstance(value, list) or len(value) > MAX_MESSAGES
                                  or not all(_is_message(item) for item in value)):  # fmt: skip
            raise MalformedResults(
                f"{name} must be a list of at most {MAX_MESSAGES} {{code, message}} objects (a code of "
                f"lower-case letters, digits and _ up to 64 characters; a message up to {MESSAGE_CHARS})"
            )
    environment = figures.get("environment")
    if environment is not None and (
        not isinstance(environment, dict) or len(json.dumps(environment)) > MAX_ENVIRONMENT_BYTES
    ):
        raise MalformedResults(f"environment must be an object of at most {MAX_ENVIRONMENT_BYTES} bytes")


@transaction.atomic
def import_records(records: list[dict], *, by: Author) -> ResultsImport:
    """`by` stores every record on the kernels it belongs to (see the module's docstring)."""
    result = ResultsImport()
    hardware: dict[str, Hardware] = {}
    found: dict[str, dict[tuple, list[Kernel]]] = {}
    rules_by_slug: dict[str | None, ScoringRules | None | bool] = {}  # a file names a few rules, on every line
    stored: set[tuple] = set()
    for item in records:
        slug = str(item["hardware"].get("slug", ""))
        if slug not in hardware:
            hardware[slug] = _hardware(item["hardware"])
            found[slug] = _kernels_of(records, hardware[slug])
            stored |= _stored_keys(found[slug], hardware[slug])
        named = item.get("rules")
        rules_slug = str(named.get("slug", "")) if named else None
        if rules_slug not in rules_by_slug:
            rules_by_slug[rules_slug] = _rules(named)
        rules = rules_by_slug[rules_slug]
        if rules is False:
            result.counts["skipped: rules unknown here"] += 1
            continue
        kernels = _matching(found[slug], item["kernel"])
        if not kernels:
            result.counts["skipped: no kernel with that source hash and problem here"] += 1
            continue
        for kernel in kernels:
            outcome = _store(kernel, hardware[slug], rules, item["evaluation"], stored)
            result.counts[outcome] += 1
            if outcome == "created":
                result.kernels.add(kernel.pk)
    for kernel_id in sorted(result.kernels):
        refresh_latest_evaluation(kernel_id)
    WriteRecord.objects.note(by, "import_results", Evaluation, summary=result.summary())
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


def _key(source_hash, problem_set, level, number) -> tuple:
    return (str(source_hash or ""), str(problem_set or ""), str(level), str(number))


def _kernels_of(records: list[dict], hardware: Hardware) -> dict[tuple, list[Kernel]]:
    """The kernels on `hardware` whose code any record names, by (source hash, set, level, number):
    one query for a whole file instead of one per line."""
    hashes = {str(item["kernel"].get("source_hash", "")) for item in records}
    kernels = Kernel.objects.filter(source_hash__in=hashes, run__hardware=hardware).select_related(
        "problem__problem_set"
    )
    by_key: dict[tuple, list[Kernel]] = {}
    for kernel in kernels.order_by("pk"):
        problem = kernel.problem
        key = _key(kernel.source_hash, problem.problem_set.slug, problem.level, problem.number)
        by_key.setdefault(key, []).append(kernel)
    return by_key


def _matching(by_key: dict[tuple, list[Kernel]], key: dict) -> list[Kernel]:
    kernels = by_key.get(_key(key.get("source_hash"), key.get("problem_set"), key.get("level"), key.get("problem")), [])
    wanted = key.get("problem_hash")
    return [kernel for kernel in kernels if not wanted or kernel.problem.source_hash == wanted]


def _stored_keys(by_key: dict[tuple, list[Kernel]], hardware: Hardware) -> set[tuple]:
    """(kernel, rules, finished_at) of the evaluations already stored on `hardware` for these kernels:
    one query for a whole file instead of one per line."""
    kernel_ids = [kernel.pk for kernels in by_key.values() for kernel in kernels]
    rows = Evaluation.objects.filter(kernel_id__in=kernel_ids, hardware=hardware, finished_at__isnull=False)
    return set(rows.values_list("kernel_id", "rules_id", "finished_at"))


def _store(kernel: Kernel, hardware: Hardware, rules: ScoringRules | None, figures: dict, stored: set[tuple]) -> str:
    times = {name: parse_datetime(figures[name]) if figures.get(name) else None for name in TIMES}
    key = (kernel.pk, rules.pk if rules else None, times["finished_at"])
    if key in stored:
        return "already stored"
    stored.add(key)  # a file holding the same record twice stores it once
    values = {name: figures.get(name) for name in FIGURES}
    values = {name: value for name, value in values.items() if value is not None}
    evaluation = Evaluation.objects.create(
        kernel=kernel, hardware=hardware, rules=rules, origin=figures["origin"], state=Evaluation.State.DONE,
        started_at=times["started_at"], finished_at=times["finished_at"], **values,
    )  # fmt: skip
    if times["queued_at"]:  # auto_now_add set it to now: keep when it was asked for
        Evaluation.objects.filter(pk=evaluation.pk).update(queued_at=times["queued_at"])
    return "created"
