"""LOG_FORMAT=json: one JSON object a log record (leaderboard/ops/logs.py, config/settings.py)."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

from leaderboard.ops.logs import JsonFormatter

ROOT = Path(__file__).resolve().parents[2]


def test_a_record_is_one_json_object_with_its_extras_and_traceback():
    try:
        raise ValueError("boom")
    except ValueError:
        record = logging.LogRecord("kb.test", logging.ERROR, __file__, 1, "evaluation %s failed", (7,), sys.exc_info())
    record.evaluation = 7
    entry = json.loads(JsonFormatter().format(record))
    assert entry["level"] == "ERROR" and entry["logger"] == "kb.test" and entry["message"] == "evaluation 7 failed"
    assert entry["evaluation"] == 7 and "ValueError: boom" in entry["exception"] and entry["time"].endswith("+00:00")


def test_log_format_json_switches_the_sites_logs(tmp_path):
    code = "import django, logging; django.setup(); logging.getLogger('kb.check').warning('hello %s', 'json')"
    env = {**os.environ, "LOG_FORMAT": "json", "DJANGO_SETTINGS_MODULE": "config.settings", "KB_VAR_DIR": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    entry = json.loads(done.stderr.strip().splitlines()[-1])
    assert (entry["logger"], entry["message"], entry["level"]) == ("kb.check", "hello json", "WARNING")
