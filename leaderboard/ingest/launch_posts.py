"""Validating and storing launch posts: the admin CSV upload, the API and the import command.

Columns: date, lab, model, title, url, lists_kernelbench, kernelbench_score. A post is known by its
URL, so a second import of the same rows changes nothing. Labs and models are matched
case-insensitively, or created, as for reported scores.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass

from django.db import transaction
from django.utils import timezone

from leaderboard.ingest.model_names import match_lab, match_model
from leaderboard.ingest.tables import RowErrors, check_texts, read_csv_rows, validate_rows
from leaderboard.models import Author, LaunchPost, WriteRecord
from problems.importing import ImportReport, upsert

COLUMNS = ("date", "lab", "model", "title", "url", "lists_kernelbench", "kernelbench_score")
REQUIRED = ("date", "lab", "title", "url")
MAX_LENGTHS = {"lab": 120, "model": 120, "title": 300, "url": 500, "kernelbench_score": 200}
TRUE, FALSE = {"true", "yes", "y", "1"}, {"false", "no", "n", "0"}

__all__ = ["COLUMNS", "PostRow", "RowErrors", "parse_rows", "read_csv", "store_rows"]


@dataclass(frozen=True)
class PostRow:
    line: int
    published_on: dt.date
    lab: str
    model: str
    title: str
    url: str
    lists_kernelbench: bool
    kernelbench_score: str


def _text(raw: dict, name: str) -> str:
    value = raw.get(name)
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if not isinstance(value, (str, int, float)):
        raise ValueError(f"{name} must be text, not {type(value).__name__}")
    return str(value).strip()


def parse_row(raw: dict, line: int) -> PostRow:
    """One row as a PostRow; raises ValueError saying what is wrong."""
    if not isinstance(raw, dict):
        raise ValueError("is not an object with the columns " + ", ".join(COLUMNS))
    unknown = sorted(str(name) for name in raw if name not in COLUMNS)
    if unknown:
        raise ValueError(f"unknown column(s) {', '.join(unknown)}")
    values = {name: _text(raw, name) for name in COLUMNS}
    missing = [name for name in REQUIRED if not values[name]]
    if missing:
        raise ValueError(f"missing {', '.join(missing)}")
    check_texts(values, MAX_LENGTHS)
    try:
        published_on = (
            dt.date.fromisoformat(values["date"]) if re.match(r"^\d{4}-\d{2}-\d{2}$", values["date"]) else None
        )
    except ValueError:
        published_on = None
    if published_on is None:
        raise ValueError(f"date {values['date']!r} is not a date (YYYY-MM-DD)")
    if published_on > timezone.now().date():
        raise ValueError(f"date {values['date']} is in the future")
    if not re.match(r"^https?://[^\s/]+\S*$", values["url"], re.IGNORECASE):
        raise ValueError(f"url {values['url']!r} is not an http(s) URL")
    flag = values["lists_kernelbench"].lower()
    if flag in TRUE:
        lists = True
    elif flag in FALSE:
        lists = False
    elif flag == "":
        lists = bool(values["kernelbench_score"])
    else:
        raise ValueError(f"lists_kernelbench {values['lists_kernelbench']!r} is not true or false")
    if values["kernelbench_score"] and not lists:
        raise ValueError("kernelbench_score is given but lists_kernelbench is false")
    return PostRow(
        line=line,
        published_on=published_on,
        lab=values["lab"],
        model=values["model"],
        title=values["title"],
        url=values["url"],
        lists_kernelbench=lists,
        kernelbench_score=values["kernelbench_score"],
    )


def parse_rows(raws: list[tuple[int, dict]], label: str = "line") -> list[PostRow]:
    """Validate every row; raise RowErrors listing each bad row and each duplicate URL."""
    return validate_rows(raws, parse_row, key=lambda row: row.url, label=label, duplicate_hint=" (same url)")


def read_csv(text: str, name: str = "input") -> list[PostRow]:
    return read_csv_rows(
        text, name, REQUIRED, parse_row, key=lambda row: row.url, columns=COLUMNS, duplicate_hint=" (same url)"
    )


@transaction.atomic
def store_rows(rows: list[PostRow], *, by: Author) -> ImportReport:
    """`by` upserts every post by URL in one transaction."""
    report = ImportReport()
    for row in rows:
        lab = match_lab(row.lab)
        model = match_model(row.model, lab) if row.model else None
        _, outcome = upsert(
            LaunchPost,
            {"url": row.url},
            {
                "lab": lab,
                "model": model,
                "title": row.title,
                "published_on": row.published_on,
                "lists_kernelbench": row.lists_kernelbench,
                "kernelbench_score": row.kernelbench_score,
            },
        )
        report.add(outcome)
    WriteRecord.objects.note(by, "store_launch_posts", LaunchPost, summary=report.summary("launch posts"))
    return report
