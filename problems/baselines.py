"""Parsing KernelBench's baseline timing files (results/timing/<hardware>/*.json)."""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path

from evaluation.results.metrics import MIN_RUNTIME_MS
from problems.importing import checked_int
from problems.kernelbench_files import PROBLEM_FILE, MalformedInput
from problems.models import Baseline, Problem

LEVEL_KEY = re.compile(r"^level([1-4])$")
COMPILE_FILE = re.compile(r"baseline_time_torch_compile_(?P<variant>.+)\.json$")
STAT_FIELDS = ("mean", "std", "min", "max")


@dataclass(frozen=True)
class BaselineEntry:
    level: int
    number: int
    file_name: str
    mean_ms: float
    std_ms: float | None
    min_ms: float | None
    max_ms: float | None
    num_trials: int | None
    device_name: str


def compile_variant_from_name(path: Path) -> str:
    match = COMPILE_FILE.search(path.name)
    return match["variant"] if match else ""


def _number(value, where: str, *, positive: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise MalformedInput(f"{where}: expected a number, got {value!r}")
    if not math.isfinite(value):
        raise MalformedInput(f"{where}: expected a finite number, got {value!r}")
    if value < 0 or (positive and value == 0):
        raise MalformedInput(f"{where}: expected a {'positive' if positive else 'non-negative'} number, got {value!r}")
    if positive and value < MIN_RUNTIME_MS:
        raise MalformedInput(f"{where}: {value!r} ms is under the physical floor of {MIN_RUNTIME_MS:g} ms")
    return float(value)


def _problem_number(text: str, where: str) -> int:
    try:
        return checked_int(text, Problem, "number")
    except ValueError as exc:
        raise MalformedInput(f"{where}: problem number {exc}") from None


def _entry(path: Path, level: int, file_name: str, stats) -> BaselineEntry:
    where = f"{path}: key level{level}/{file_name}"
    match = PROBLEM_FILE.match(file_name)
    if not match:
        raise MalformedInput(f"{where}: not a problem file name (<number>_<Name>.py)")
    if not isinstance(stats, dict):
        raise MalformedInput(f"{where}: expected an object of timing statistics")
    if "mean" not in stats:
        raise MalformedInput(f"{where}/mean: missing")
    values = {
        f: (_number(stats[f], f"{where}/{f}", positive=f == "mean") if stats.get(f) is not None else None)
        for f in STAT_FIELDS
    }
    trials = stats.get("num_trials")
    if trials is not None:
        try:
            whole = int(trials) if isinstance(trials, float) and trials.is_integer() and trials < 1e18 else trials
            trials = checked_int(whole, Baseline, "num_trials")
        except ValueError as exc:
            raise MalformedInput(f"{where}/num_trials: {exc}") from None
    return BaselineEntry(
        level=level,
        number=_problem_number(match["number"], where),
        file_name=file_name,
        mean_ms=values["mean"],
        std_ms=values["std"],
        min_ms=values["min"],
        max_ms=values["max"],
        num_trials=trials,
        device_name=str(stats.get("hardware") or stats.get("device") or ""),
    )


def read_baseline_file(path: Path) -> list[BaselineEntry]:
    """Every entry of one timing file; raises MalformedInput naming the line or key at fault."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise MalformedInput(f"{path}:{exc.lineno}:{exc.colno}: not valid JSON: {exc.msg}") from None
    except UnicodeDecodeError as exc:
        raise MalformedInput(f"{path}: byte {exc.start} is not UTF-8") from None
    if not isinstance(data, dict):
        raise MalformedInput(f"{path}: expected an object keyed by level1, level2, ...")
    entries = []
    for level_key, problems in data.items():
        match = LEVEL_KEY.match(level_key)
        if not match:
            raise MalformedInput(f"{path}: key {level_key!r}: expected level1 ... level4")
        if not isinstance(problems, dict):
            raise MalformedInput(f"{path}: key {level_key}: expected an object keyed by problem file name")
        entries.extend(_entry(path, int(match[1]), name, stats) for name, stats in problems.items())
    return entries
