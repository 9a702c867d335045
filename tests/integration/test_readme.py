"""README's "First steps" run as written: the block after its `readme-test: first-steps` marker is
read from README.md itself (so a change to the README is tested) and run with bash, in a scratch
copy of the checkout's layout, against a seeded database (migrate + seed_demo, as `make run`)
served by a real server."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.integration.conftest import free_port

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]
MARKER = "<!-- readme-test: first-steps -->"


def first_steps() -> str:
    """The sh block right after the marker in README.md."""
    text = (REPO / "README.md").read_text()
    match = re.search(re.escape(MARKER) + r"\s*```sh\n(.*?)```", text, re.S)
    assert match, f"README.md has no sh block after {MARKER}"
    return match.group(1)


def scratch_checkout(folder: Path) -> Path:
    """The names the block uses (.venv, manage.py, problems/) linked from the checkout, so files it
    writes (runs/my_run) land in a scratch folder, not in the checkout."""
    folder.mkdir()
    (folder / ".venv").symlink_to(Path(sys.executable).parents[1])  # the running venv (make's .venv)
    for name in ("manage.py", "problems", "config", "leaderboard", "evaluation", "kbl", "templates", "static"):
        (folder / name).symlink_to(REPO / name)
    return folder


def wait_until_up(url: str, deadline_s: float = 60) -> None:
    start = time.monotonic()
    while time.monotonic() - start < deadline_s:
        try:
            urllib.request.urlopen(url + "/api/v1/", timeout=5)
            return
        except urllib.error.HTTPError:  # it answers, whatever it says
            return
        except OSError:
            time.sleep(0.5)
    raise AssertionError(f"{url} did not answer")


@pytest.fixture
def served(tmp_path):
    """A `make run` database (migrated, demo seeded) in tmp_path, served on a free port."""
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}", "KB_VAR_DIR": str(tmp_path / "var")}
    env.pop("DJANGO_SETTINGS_MODULE", None)
    manage = [sys.executable, str(REPO / "manage.py")]
    for command in (["migrate", "--noinput", "-v0"], ["seed_demo"]):
        subprocess.run([*manage, *command], cwd=REPO, env=env, check=True, capture_output=True, timeout=300)
    url = f"http://127.0.0.1:{free_port()}"
    server = subprocess.Popen(
        [*manage, "runserver", "--noreload", url.removeprefix("http://")], cwd=REPO, env=env,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        wait_until_up(url)
        yield env, url
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_the_readme_first_steps_run_as_written(served, tmp_path):
    env, url = served
    folder = scratch_checkout(tmp_path / "checkout")
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", first_steps()],
        cwd=folder, env={**env, "KBL_URL": url, "KBL_CONFIG": "/nonexistent"},
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert (folder / "runs/my_run/level_1_problem_3_sample_0_kernel.py").read_text().count("class ModelNew(") == 1
    assert "run" in done.stdout.lower(), done.stdout
