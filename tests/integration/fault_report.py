"""What the fault suite measured, for benchmarks/faults_replay.py: each test records its figures
here, and they are written (one JSON object a line) to $KB_FAULTS_REPORT when it is set."""

from __future__ import annotations

import json
import os
from typing import Any


def record(case: str, **figures: Any) -> None:
    path = os.environ.get("KB_FAULTS_REPORT")
    if path:
        with open(path, "a") as fh:
            fh.write(json.dumps({"case": case, **figures}, default=str) + "\n")
