"""The README's path, all from the client (kbl) against a live test server, a real Redis and a real
CPU worker: import a KernelBench run folder zip with just a model, watch it verify, read its fast_p
table, export it back as a KernelBench run folder, and get the same fast_p from KernelBench's own
formulas on the export."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from django.contrib.auth.models import Permission, User
from rest_framework.authtoken.models import Token

from leaderboard.models import LanguageModel, Run
from leaderboard.reads import runs as reads
from problems.models import Problem, ProblemSet
from tests.api.test_kernelbench_export import kernelbench_analysis
from tests.sources import PROBLEM_SOURCE

from .conftest import CORRECT_KERNEL, REPO, WRONG_KERNEL

pytestmark = pytest.mark.slow


@pytest.fixture
def site(env, live_server, cpu):
    """Two level-1 problems, and the environment the client reads its site and token from."""
    problem_set = ProblemSet.objects.create(slug="kb", name="KernelBench test")
    for number in (1, 2):
        Problem.objects.create(
            problem_set=problem_set, level=1, number=number, name=f"Matmul_{number}", source=PROBLEM_SOURCE
        )
    user = User.objects.create_user("lab")
    codenames = ["add_run", "add_kernel", "add_evaluation"]
    user.user_permissions.add(*Permission.objects.filter(content_type__app_label="leaderboard", codename__in=codenames))
    return {
        **env,
        "KBL_URL": live_server.url,
        "KBL_TOKEN": Token.objects.create(user=user).key,
        "KBL_CONFIG": "/nonexistent",
    }


def kbl(environ: dict[str, str], *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "kbl", *args], cwd=REPO, env=environ, capture_output=True, text=True, timeout=timeout
    )


def run_zip(path: Path) -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("my_run/level_1_problem_1_sample_0_kernel.py", CORRECT_KERNEL)
        archive.writestr("my_run/level_1_problem_2_sample_0_kernel.py", WRONG_KERNEL)
    return path


def test_import_verify_watch_and_export_from_the_client(site, workers, tmp_path):
    site["EVAL_TIMING_TRIALS"], site["EVAL_CORRECTNESS_TRIALS"] = "3", "2"
    worker = workers.start()
    submitted = kbl(site, "submit", str(run_zip(tmp_path / "run.zip")), "--model", "Client Model", "--hardware", "CPU",
                    "--verify", "--wait", "--interval", "0.5", "--timeout", "240")  # fmt: skip
    assert submitted.returncode == 0, submitted.stdout + submitted.stderr + workers.output(worker)[-3000:]
    run = Run.objects.get()
    assert "queued 2 evaluations" in submitted.stdout and "not evaluated" not in submitted.stderr
    assert "2 of 2 kernels evaluated" in submitted.stderr  # the progress bar's last line
    assert "fast_1" in submitted.stdout and "sample 0" in submitted.stdout and f"/runs/{run.pk}/" in submitted.stdout

    (score,) = reads.run_scores(run, reads.run_problems(run))
    assert score.correct_rate == 0.5
    status = kbl(site, "status", str(run.pk))
    assert status.returncode == 0 and "50.0%" in status.stdout

    exported = kbl(site, "export", str(run.pk), "-o", str(tmp_path / "back.zip"))
    assert exported.returncode == 0, exported.stderr
    with zipfile.ZipFile(tmp_path / "back.zip") as archive:
        files = {info.filename: archive.read(info).decode() for info in archive.infolist()}
    folder = next(iter(files)).split("/")[0]
    theirs = kernelbench_analysis(files, folder, 1, score.n_problems)
    assert theirs["0.0"] == score.fast_p["fast_0"] and theirs["1.0"] == score.fast_p["fast_1"]
    assert theirs["2.0"] == score.fast_p["fast_2"]

    # The export goes back in with no --model: its generation_config.yaml names the model.
    again = kbl(site, "submit", str(tmp_path / "back.zip"), "--hardware", "cpu", "--name", "again")
    assert again.returncode == 0, again.stderr
    copy = Run.objects.select_related("model").get(name="again")
    assert copy.model.name == "Client Model" and copy.pk != run.pk
    (copied,) = reads.run_scores(copy, reads.run_problems(copy))
    assert copied.correct_rate == score.correct_rate  # no CPU baseline here: its speedups are unscored


def test_the_client_exits_non_zero_on_failures(site, workers, tmp_path):
    site["EVAL_TIMING_TRIALS"], site["EVAL_CORRECTNESS_TRIALS"] = "3", "2"
    missing = kbl(site, "status", "999")
    assert missing.returncode == 3 and "HTTP 404" in missing.stderr
    refused = kbl(
        {**site, "KBL_TOKEN": "wrong"},
        "submit",
        str(run_zip(tmp_path / "run.zip")),
        "--model",
        "M",
        "--hardware",
        "cpu",
    )
    assert refused.returncode == 3 and "HTTP 401" in refused.stderr
    empty = tmp_path / "empty"
    empty.mkdir()
    assert kbl(site, "submit", str(empty), "--model", "M", "--hardware", "cpu").returncode == 2
    kernel = tmp_path / "wrong.py"
    kernel.write_text(WRONG_KERNEL)
    workers.start()
    problem = Problem.objects.get(number=2)
    LanguageModel.objects.create(name="Client Model", slug="client-model")
    args = ("kernel", str(problem.pk), str(kernel), "--hardware", "cpu", "--model", "client-model", "--wait")
    wrong = kbl(site, *args, "--interval", "0.5")
    assert wrong.returncode == 1, wrong.stdout + wrong.stderr
    assert "done: incorrect" in wrong.stdout


def test_a_config_file_gives_the_site_and_token(site, tmp_path):
    config = tmp_path / "kbl.ini"
    config.write_text(f"[kbl]\nurl = {site['KBL_URL']}\ntoken = {site['KBL_TOKEN']}\n")
    environ = {k: v for k, v in site.items() if k not in ("KBL_URL", "KBL_TOKEN")} | {"KBL_CONFIG": str(config)}
    submitted = kbl(environ, "submit", str(run_zip(tmp_path / "run.zip")), "--model", "M", "--hardware", "cpu")
    assert submitted.returncode == 0, submitted.stderr
    assert (
        "submit again with --verify" in submitted.stderr
        and "2 of 2 kernels are stored, not evaluated" in submitted.stderr
    )
    status = kbl(environ, "status", str(Run.objects.get().pk))
    assert status.returncode == 0 and "0 of 2 kernels evaluated, 2 not evaluated" in status.stdout
