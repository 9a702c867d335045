"""The client's pieces that need no site: where it finds the site and token, how it zips a run
folder, what it prints."""

from __future__ import annotations

import io
import zipfile

import pytest

from kbl import display
from kbl.bundle import read_upload
from kbl.config import settings
from kbl.errors import UsageError
from kbl.http import multipart


def test_flags_beat_the_environment_which_beats_the_config_file(tmp_path, monkeypatch):
    config = tmp_path / "config"
    config.write_text("[kbl]\nurl = https://file.example/\ntoken = from-file\n")
    monkeypatch.setenv("KBL_CONFIG", str(config))
    monkeypatch.delenv("KBL_URL", raising=False)
    monkeypatch.delenv("KBL_TOKEN", raising=False)
    assert settings() == settings(None, None)
    assert (settings().url, settings().token) == ("https://file.example", "from-file")
    monkeypatch.setenv("KBL_TOKEN", "from-env")
    assert settings().token == "from-env"
    assert settings(url="http://flag", token="flag").token == "flag"


def test_a_run_folder_is_zipped_with_only_what_the_import_reads(tmp_path):
    folder = tmp_path / "my_run"
    folder.mkdir()
    for name in ("level_1_problem_1_sample_0_kernel.py", "eval_results.json", "generation_config.yaml", "notes.txt"):
        (folder / name).write_text("x")
    name, data = read_upload(folder)
    assert name == "my_run.zip"
    assert sorted(zipfile.ZipFile(io.BytesIO(data)).namelist()) == [
        "my_run/eval_results.json",
        "my_run/generation_config.yaml",
        "my_run/level_1_problem_1_sample_0_kernel.py",
    ]
    (folder / "level_1_problem_1_sample_0_kernel.py").unlink()
    with pytest.raises(UsageError, match="holds no"):
        read_upload(folder)


def test_multipart_bodies_carry_fields_and_files():
    body, content_type = multipart({"model": "M"}, {"file": ("run.zip", b"PK\x03\x04")})
    boundary = content_type.split("boundary=")[1]
    assert body.startswith(f"--{boundary}\r\n".encode()) and body.endswith(f"--{boundary}--\r\n".encode())
    assert b'name="model"\r\n\r\nM\r\n' in body and b'filename="run.zip"' in body and b"PK\x03\x04" in body


def test_the_fast_p_table_shows_sample_0_and_best_of_n():
    level = {"level": 1, "n_problems": 4, "fast_p": {"fast_0": 0.5, "fast_1": 0.25}, "geomean_speedup": 1.5,
             "best_of_n": {"fast_1": 0.5}, "unscored": 1}  # fmt: skip
    run = {"id": 7, "model": "M", "setting": "one-shot", "precision": "fp32", "hardware": "h200"}
    table = display.fast_p_table({"run": run, "levels": [level]})
    assert "run 7: M" in table and "25.0%" in table and "50.0%" in table and "1.50x" in table
    assert "best-of-n" in table and "1 correct without a baseline" in table


def test_the_progress_bar_fills_with_finished_evaluations():
    stream = io.StringIO()
    display.progress_bar({"total": 4, "evaluated": 1, "failed": 1, "label": "1 of 4 evaluated, 1 failed"}, stream)
    assert stream.getvalue() == "[" + "#" * 15 + "." * 15 + "] 1 of 4 evaluated, 1 failed\n"
