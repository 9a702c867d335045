"""The suite's timing table in docs/performance.md ("The slowest tests") names tests that exist: a
test renamed, moved or removed fails here until the table is measured again (tests/run-suites.sh
prints each part's 30 slowest tests; the table holds the 20 slowest of a whole run)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "performance.md"
HEADING = "## The slowest tests"
ROW = re.compile(r"^\| *([0-9.]+) *\| *(setup|call|teardown) *\| *`([^`]+)` *\|$")


def table_rows(text: str) -> list[tuple[float, str, str]]:
    """(seconds, phase, node id) of the table under HEADING."""
    section = text[text.index(HEADING) :]
    end = section.find("\n## ", len(HEADING))
    lines = section[: end if end > 0 else None].splitlines()
    return [(float(m[1]), m[2], m[3]) for line in lines if (m := ROW.match(line.strip()))]


def defined(node_id: str) -> bool:
    path, _, name = node_id.partition("::")
    name = name.split("[", 1)[0].split("::")[-1]
    file = ROOT / path
    return file.is_file() and re.search(rf"^\s*(async )?def {re.escape(name)}\(", file.read_text(), re.M) is not None


def test_the_table_lists_the_twenty_slowest_tests_slowest_first():
    rows = table_rows(DOC.read_text())
    assert len(rows) == 20
    seconds = [row[0] for row in rows]
    assert seconds == sorted(seconds, reverse=True)


def test_every_test_it_names_exists():
    missing = [node for _, _, node in table_rows(DOC.read_text()) if not defined(node)]
    assert missing == [], f"measure the table again (docs/performance.md, {HEADING!r}): {missing}"


def test_a_missing_test_is_found():
    assert defined("tests/unit/test_suite_timing_table.py::test_a_missing_test_is_found")
    assert not defined("tests/unit/test_suite_timing_table.py::test_that_never_was")
    assert not defined("tests/nowhere.py::test_a_missing_test_is_found")


def test_the_table_is_made_from_a_runs_output_each_test_once_by_its_slower_run():
    from benchmarks.suite_timing import slowest, table

    log = "\n".join(
        [
            "== database suites on SQLite ==",
            "12.50s call     tests/django/test_a.py::test_x",
            "3.00s setup    tests/django/test_a.py::test_x",
            "== database suites on PostgreSQL ==",
            "> 20.25s call     tests/django/test_a.py::test_x",
            "9.00s call     tests/unit/test_b.py::test_y[1]",
        ]
    )
    rows = slowest(log, 2)
    assert rows == [(20.25, "call", "tests/django/test_a.py::test_x"), (9.0, "call", "tests/unit/test_b.py::test_y[1]")]
    assert table(rows).splitlines()[2] == "| 20.25 | call | `tests/django/test_a.py::test_x` |"
