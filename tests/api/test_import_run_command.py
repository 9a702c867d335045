import io
import json

import pytest
from django.core.management import CommandError, call_command

from leaderboard.models import Evaluation, Kernel, Run

from .conftest import KERNEL
from .test_run_import import RESULTS, run_zip


def run(*args) -> str:
    out = io.StringIO()
    call_command("import_run", *map(str, args), stdout=out)
    return out.getvalue()


@pytest.fixture
def folder(tmp_path):
    root = tmp_path / "gpt-run"
    (root / "sub").mkdir(parents=True)
    (root / "level_1_problem_1_sample_0_kernel.py").write_text(KERNEL)
    (root / "sub" / "level_1_problem_2_sample_0_kernel.py").write_text(KERNEL)
    (root / "eval_results.json").write_text(json.dumps(RESULTS))
    (root / "generation.log").write_text("ignored")
    return root


def test_it_imports_a_run_folder_and_names_the_run_after_it(folder, problem_set, hardware, baseline):
    out = run(folder, "--model", "GPT-X", "--hardware", "cpu")
    assert "kernels: 2 created" in out and "imported evaluations: 2 created" in out
    assert Run.objects.get().name == "gpt-run" and Evaluation.objects.get(speedup__isnull=False).speedup == 2.0


def test_a_second_import_changes_nothing(folder, problem_set, hardware):
    run(folder, "--model", "GPT-X", "--hardware", "cpu")
    assert "0 created, 0 updated, 2 unchanged" in run(folder, "--model", "gpt-x", "--hardware", "cpu")


def test_it_imports_a_zip_and_can_queue_verification(tmp_path, problem_set, hardware):
    path = tmp_path / "run.zip"
    path.write_bytes(run_zip().getvalue())
    out = run(path, "--model", "GPT-X", "--hardware", "cpu", "--set", "kb", "--verify")
    assert "queued 2 evaluations on cpu" in out
    assert Evaluation.objects.filter(state="queued", origin="measured").count() == 2


def test_it_imports_a_json_file(tmp_path, problem_set, hardware):
    path = tmp_path / "run.json"
    path.write_text(json.dumps({"kernels": {"level_1_problem_1_sample_0_kernel.py": KERNEL}}))
    run(path, "--model", "GPT-X", "--hardware", "cpu")
    assert Kernel.objects.count() == 1


def test_errors_are_listed_and_nothing_is_written(folder, problem_set, hardware):
    (folder / "level_1_problem_9_sample_0_kernel.py").write_text(KERNEL)
    with pytest.raises(CommandError, match="problem 9 of level 1 is not in kb"):
        run(folder, "--model", "GPT-X", "--hardware", "cpu")
    assert Run.objects.count() == 0


def test_unknown_hardware_set_or_path(folder, tmp_path, problem_set, hardware):
    with pytest.raises(CommandError, match="no hardware"):
        run(folder, "--model", "M", "--hardware", "h999")
    with pytest.raises(CommandError, match="no problem set"):
        run(folder, "--model", "M", "--hardware", "cpu", "--set", "nope")
    with pytest.raises(CommandError, match="not a folder"):
        run(tmp_path / "x.txt", "--model", "M", "--hardware", "cpu")
