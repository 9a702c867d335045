"""The client's pieces that need no site: where it finds the site and token, how it zips a run
folder, what it prints."""

from __future__ import annotations

import io
import json
import zipfile

import pytest

from kbl import display
from kbl.bundle import read_upload
from kbl.cli import main
from kbl.config import settings
from kbl.errors import UsageError
from kbl.http import Api, multipart, origin
from tests.hostile_site import hostile_site


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


# --- replies from a hostile or broken site (issue 19 cases 12 and 13) -------------------------


def _api(url: str) -> Api:
    return Api(settings(url=url, token="s3cret"))


def test_the_token_does_not_follow_a_redirect_to_another_origin():
    with hostile_site() as (other, other_seen), hostile_site(elsewhere=other) as (home, home_seen):
        _api(home).get("/redirect-away")
    assert home_seen == ["Token s3cret"] and other_seen == [None]


def test_the_token_follows_a_redirect_within_the_origin():
    with hostile_site() as (home, seen):
        _api(home).get("/redirect-home")
    assert seen == ["Token s3cret", "Token s3cret"]


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        ("https://kb.example/x", "https://KB.example:443/y", True),
        ("https://kb.example/x", "http://kb.example/x", False),
        ("https://kb.example/x", "https://kb.example:8443/x", False),
        ("https://kb.example/x", "https://kb.example.evil/x", False),
    ],
)
def test_an_origin_is_scheme_host_and_port(a, b, same):
    assert (origin(a) == origin(b)) is same


@pytest.mark.parametrize(
    "reply",
    [b"<html>502 Bad Gateway</html>", b"[]", b'{"kernels": {}}', b'{"run": {"id": "7"}, "kernels": {}}',
     b'{"run": {"id": 7}, "kernels": {"created": 1, "unchanged": 0}, "warnings": "x"}'],
)  # fmt: skip
def test_an_unexpected_reply_is_exit_3_with_a_message_not_a_traceback(reply, tmp_path, capsys):
    run = tmp_path / "run.zip"
    with zipfile.ZipFile(run, "w") as archive:
        archive.writestr("level_1_problem_1_sample_0_kernel.py", "x")
    with hostile_site(reply) as (home, _seen):
        code = main(["submit", str(run), "--hardware", "cpu", "--url", home, "--token", "t"])
    err = capsys.readouterr().err
    assert code == 3 and "unexpected reply from" in err and "Traceback" not in err, err


def test_scores_of_the_wrong_shape_are_exit_3(capsys):
    scores = {"run": {"id": 1, "model": "M", "setting": "s", "precision": "fp32", "hardware": "h"},
              "progress": {"total": 1, "evaluated": 1, "failed": 0, "pending": 0, "label": "1 of 1"},
              "levels": [{"level": 1, "n_problems": 1, "fast_p": {"fast_1": "lots"}}]}  # fmt: skip
    with hostile_site(json.dumps(scores).encode()) as (home, _seen):
        code = main(["status", "1", "--url", home])
    err = capsys.readouterr().err
    assert code == 3 and "fast_p.fast_1 is not int or float" in err, err


def test_server_text_is_printed_with_control_characters_escaped(capsys):
    hostile = "M\x1b]0;pwned\x07\x1b[2J\u202eevil\x9b"
    scores = {"run": {"id": 1, "model": hostile, "setting": "s\r\nfake: ok", "precision": "fp32", "hardware": "h"},
              "progress": {"total": 1, "evaluated": 1, "failed": 0, "pending": 0, "label": "done\x1b[1A"},
              "levels": []}  # fmt: skip
    with hostile_site(json.dumps(scores).encode()) as (home, _seen):
        assert main(["status", "1", "--url", home]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\u202e" not in out and "\x9b" not in out and "\r" not in out
    assert "M\\x1b]0;pwned\\x07\\x1b[2J\\u202eevil\\x9b" in out and "s\\r\\nfake: ok" in out


def test_printable_keeps_ordinary_text():
    assert display.printable("Ünïcode model · 7B (fp16)") == "Ünïcode model · 7B (fp16)"


def test_an_export_that_is_not_a_zip_is_exit_3_and_writes_nothing(tmp_path, capsys):
    output = tmp_path / "run.zip"
    with hostile_site(b"<html>502 Bad Gateway</html>") as (home, _seen):
        code = main(["export", "1", "-o", str(output), "--url", home])
    assert code == 3 and "not a zip archive" in capsys.readouterr().err and not output.exists()
