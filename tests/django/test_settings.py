import os
import subprocess
import sys

import pytest
from django.conf import settings

from config.env import env_bool, secret_key_from_file


def test_secret_key_file_is_created_private_and_reused(tmp_path):
    path = tmp_path / "secret_key"
    key = secret_key_from_file(path)
    assert len(key) > 40
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    assert secret_key_from_file(path) == key


def test_a_key_written_meanwhile_by_another_process_wins(tmp_path, monkeypatch):
    # Another process (the web server beside a worker, a second test run) writes the file after this
    # one found none: both must go on with that one key, never overwrite it.
    import config.env

    path = tmp_path / "secret_key"
    real = config.env.secrets.token_urlsafe

    def the_other_writes_first(n):
        path.write_text("the-other-process-key\n")
        return real(n)

    monkeypatch.setattr(config.env.secrets, "token_urlsafe", the_other_writes_first)
    assert secret_key_from_file(path) == "the-other-process-key"
    assert path.read_text() == "the-other-process-key\n"
    assert [p.name for p in tmp_path.iterdir()] == ["secret_key"]  # no temporary file left behind


def test_env_bool_rejects_nonsense(monkeypatch):
    monkeypatch.setenv("X_FLAG", "maybe")
    with pytest.raises(ValueError, match="X_FLAG"):
        env_bool("X_FLAG")


def test_debug_is_off_by_default():
    assert settings.DEBUG is False or os.environ.get("DEBUG")


def test_deploy_check_reports_nothing_under_production_settings():
    # Production shares its cache (the write limit) through a Redis of its own, apart from the queue's.
    result = _deploy_check(REDIS_URL="redis://127.0.0.1:6379/0", CACHE_REDIS_URL="redis://127.0.0.1:6380/0")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


def test_deploy_check_warns_when_the_cache_shares_the_queues_redis():
    result = _deploy_check(REDIS_URL="redis://127.0.0.1:6379/0")
    assert result.returncode != 0 and "kb.W012" in result.stdout + result.stderr


def _deploy_check(**variables: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "CACHE_REDIS_URL")}
    env.update({"DJANGO_SETTINGS_MODULE": "config.settings_production", "SECRET_KEY": "x" * 60 + "-Z9q!", **variables})
    return subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=settings.BASE_DIR, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def test_production_settings_refuse_to_start_without_secret_key():
    env = {k: v for k, v in os.environ.items() if k != "SECRET_KEY"}
    env["DJANGO_SETTINGS_MODULE"] = "config.settings_production"
    result = subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=settings.BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode != 0
    assert "SECRET_KEY must be set" in result.stderr


def test_the_cache_lives_in_cache_redis_url_apart_from_the_queue():
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings", "REDIS_URL": "redis://queue:6379/0",
           "CACHE_REDIS_URL": "redis://cache:6379/0"}  # fmt: skip
    code = "import django; django.setup(); from django.conf import settings as s; print(s.CACHES['default']['LOCATION'], s.RQ_QUEUES['eval-cpu']['URL'])"
    result = subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=settings.BASE_DIR, capture_output=True, text=True, timeout=60
    )
    assert result.stdout.split() == ["redis://cache:6379/0", "redis://queue:6379/0"], result.stderr
