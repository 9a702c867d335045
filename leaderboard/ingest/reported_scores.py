"""Validating and storing reported scores (the columns of data/reported_scores.csv).

One parser for every way in: the import command, and the admin and API uploads.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from dataclasses import dataclass

from django.db import transaction
from django.utils import timezone

from leaderboard.ingest.model_names import match_lab, match_model
from leaderboard.ingest.tables import RowErrors, check_texts, read_csv_rows, validate_rows
from leaderboard.models import Author, ReportedScore, WriteRecord, acting_user
from problems.importing import ImportReport, upsert

COLUMNS = ("model", "organization", "variant", "metric", "value", "unit", "setting", "hardware", "date", "source_url")
REQUIRED = ("model", "variant", "metric", "value", "unit", "date", "source_url")
DATE_DAY = re.compile(r"^\d{4}-\d{2}-\d{2}$")
DATE_MONTH = re.compile(r"^\d{4}-\d{2}$")
# The database's column sizes (PostgreSQL refuses longer text; SQLite would keep it).
MAX_LENGTHS = {
    "model": 120,
    "organization": 120,
    "variant": 200,
    "metric": 60,
    "setting": 300,
    "hardware": 120,
    "source_url": 500,
}

# Caveats of data/README.md, attached to the rows they concern so pages show them beside the score.
CAVEATS: tuple[tuple[str, str, str], ...] = (
    ("source_url", r"arxiv\.org/.*2502\.10517", "KernelBench v0 as in the original paper: fp32, one NVIDIA L40S."),
    (
        "variant",
        r"KernelBench Hard",
        "'KernelBench Hard' is not defined by the MiniMax post and is not the same as other benchmarks of similar names.",
    ),
    ("model", r"^CUDA-L1$", "CUDA-L1's first claims were revised down after problems in its measurements were found."),
    ("source_url", r"lushbinary\.com", "From a secondary write-up, not the lab's own publication."),
    ("variant", r"subset|eval set", "Measured on a subset or another harness: not comparable with full-level scores."),
)


@dataclass(frozen=True)
class ScoreRow:
    line: int
    model: str
    organization: str
    variant: str
    metric: str
    value: float
    unit: str
    setting: str
    hardware: str
    reported_on: dt.date
    date_precision: str
    source_url: str

    @property
    def key(self) -> tuple:
        return (self.model.casefold(), self.variant, self.metric, self.setting, self.source_url)

    def caveat(self) -> str:
        found = [text for column, pattern, text in CAVEATS if re.search(pattern, getattr(self, column), re.IGNORECASE)]
        return " ".join(found)


def parse_date(text: str) -> tuple[dt.date, str]:
    if DATE_DAY.match(text):
        return dt.date.fromisoformat(text), ReportedScore.DatePrecision.DAY
    if DATE_MONTH.match(text):
        return dt.date.fromisoformat(text + "-01"), ReportedScore.DatePrecision.MONTH
    raise ValueError(f"date {text!r} is not YYYY-MM-DD or YYYY-MM")


def parse_row(raw: dict, line: int) -> ScoreRow:
    """One row as a ScoreRow; raises ValueError with what is wrong."""
    values = {name: str(raw.get(name) or "").strip() for name in COLUMNS}
    missing = [name for name in REQUIRED if not values[name]]
    if missing:
        raise ValueError(f"missing {', '.join(missing)}")
    check_texts(values, MAX_LENGTHS)
    try:
        value = float(values["value"])
    except ValueError:
        raise ValueError(f"value {values['value']!r} is not a number") from None
    if not math.isfinite(value):
        raise ValueError(f"value {values['value']!r} is not a finite number")
    unit = values["unit"]
    if unit == "%" and not 0 <= value <= 100:
        raise ValueError(f"value {value:g}% is outside 0-100")
    if unit == "x" and not value > 0:
        raise ValueError(f"value {value:g}x is not positive")
    if unit not in ("%", "x"):
        raise ValueError(f"unit {unit!r} is not '%' or 'x'")
    try:
        reported_on, precision = parse_date(values["date"])
    except ValueError as exc:
        raise ValueError(str(exc)) from None
    if reported_on > timezone.now().date():
        raise ValueError(f"date {values['date']} is in the future")
    if not re.match(r"^https?://[^\s/]+", values["source_url"], re.IGNORECASE):
        raise ValueError(f"source_url {values['source_url']!r} is not an http(s) URL")
    return ScoreRow(
        line=line,
        model=values["model"],
        organization=values["organization"],
        variant=values["variant"],
        metric=values["metric"],
        value=value,
        unit=unit,
        setting=values["setting"],
        hardware=values["hardware"],
        reported_on=reported_on,
        date_precision=precision,
        source_url=values["source_url"],
    )


def parse_rows(raws: list[tuple[int, dict]]) -> list[ScoreRow]:
    """Validate every row; raise RowErrors listing each bad row (by line) and duplicates."""
    return validate_rows(raws, parse_row, key=lambda row: row.key)


def read_csv(text: str, name: str = "input") -> list[ScoreRow]:
    return read_csv_rows(text, name, REQUIRED, parse_row, key=lambda row: row.key, columns=COLUMNS)


def parse_json_rows(items) -> list[ScoreRow]:
    """Rows given as JSON (one object or a list of objects with the CSV's columns); errors name
    each row by its position, counting from 1."""
    if isinstance(items, dict):
        items = [items]
    if not isinstance(items, list) or not items:
        raise RowErrors(["expected an object or a non-empty list of objects with the columns " + ", ".join(COLUMNS)])
    raws, errors = [], []
    for index, item in enumerate(items, start=1):
        if not isinstance(item, dict):
            errors.append(f"row {index}: is not an object")
            continue
        unknown = sorted(str(name) for name in item if name not in COLUMNS)
        bad = [name for name, value in item.items() if value is not None and not isinstance(value, (str, int, float))]
        if unknown or bad:
            problem = (
                f"unknown column(s) {', '.join(unknown)}" if unknown else f"{', '.join(bad)} must be text or a number"
            )
            errors.append(f"row {index}: {problem}")
            continue
        raws.append((index, {name: "" if value is None else str(value) for name, value in item.items()}))
    try:
        rows = parse_rows(raws)
    except RowErrors as exc:
        errors += [re.sub(r"\bline (\d+)", r"row \1", error) for error in exc.errors]
    if errors:
        raise RowErrors(errors)
    return rows


@transaction.atomic
def store_rows(rows: list[ScoreRow], *, by: Author) -> ImportReport:
    """`by` upserts every row in one transaction: a second import of the same rows changes nothing.
    The scores it creates say who entered them (a command run without a user: nobody)."""
    entered_by = acting_user(by)
    report = ImportReport()
    for row in rows:
        model = match_model(row.model, match_lab(row.organization))
        score, outcome = upsert(
            ReportedScore,
            {
                "model": model,
                "variant": row.variant,
                "metric": row.metric,
                "setting": row.setting,
                "source_url": row.source_url,
            },
            {
                "value": row.value,
                "unit": row.unit,
                "hardware_name": row.hardware,
                "reported_on": row.reported_on,
                "date_precision": row.date_precision,
                "caveat": row.caveat(),
            },
        )
        if outcome == "created" and entered_by is not None:
            ReportedScore.objects.filter(pk=score.pk).update(entered_by=entered_by)
        report.add(outcome)
    WriteRecord.objects.note(by, "store_reported_scores", ReportedScore, summary=report.summary("reported scores"))
    return report
