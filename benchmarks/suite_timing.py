"""The suite's slowest tests as docs/performance.md's table ("The slowest tests"), from the output of
`make test` (tests/run-suites.sh prints each part's 30 slowest; a test of the database suites runs
twice, on SQLite and on PostgreSQL, and counts by its slower run here).

    python benchmarks/suite_timing.py /tmp/ci.log [20]
"""

from __future__ import annotations

import re
import sys

DURATION = re.compile(r"^([0-9.]+)s (setup|call|teardown) +(\S+)$")


def slowest(log: str, n: int = 20) -> list[tuple[float, str, str]]:
    """The n slowest (seconds, phase, node id), each test and phase once (its slowest), slowest first."""
    best: dict[tuple[str, str], float] = {}
    for line in log.splitlines():
        m = DURATION.match(line.strip().removeprefix("> "))
        if m:
            key = (m[3], m[2])
            best[key] = max(best.get(key, 0.0), float(m[1]))
    ranked = sorted(((s, phase, node) for (node, phase), s in best.items()), key=lambda r: (-r[0], r[2]))
    return ranked[:n]


def table(rows: list[tuple[float, str, str]]) -> str:
    lines = ["| seconds | phase | test |", "| --: | --- | --- |"]
    lines += [f"| {s:.2f} | {phase} | `{node}` |" for s, phase, node in rows]
    return "\n".join(lines)


def main(argv: list[str]) -> None:
    with open(argv[0], encoding="utf-8", errors="replace") as fh:
        print(table(slowest(fh.read(), int(argv[1]) if len(argv) > 1 else 20)))


if __name__ == "__main__":
    main(sys.argv[1:])
