import io

import pytest
from django.core.management import CommandError, call_command

from problems.models import Problem, ProblemSet
from tests.django.conftest import PROBLEM_SOURCE, write_checkout
from tests.sources import HF_PROBLEM_SOURCE

pytestmark = pytest.mark.django_db


def run(*args) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    call_command("import_problems", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def test_it_imports_level_number_name_source_and_tags(checkout):
    out, _ = run(str(checkout))
    problem = Problem.objects.get(level=1, number=1)
    assert problem.name == "Square_matrix_multiplication_"
    assert problem.source == PROBLEM_SOURCE
    assert "matmul" in problem.tag_list
    assert "fused" in Problem.objects.get(level=2, number=1).tag_list
    assert "3 created" in out


def test_it_accepts_the_kernelbench_folder_itself(checkout):
    run(str(checkout / "KernelBench"), "--set", "Mine")
    assert ProblemSet.objects.get(name="Mine").problems.count() == 3


def test_a_second_run_changes_nothing(checkout):
    run(str(checkout))
    before = list(Problem.objects.values_list("id", "updated_at"))
    out, _ = run(str(checkout))
    assert "0 created, 0 updated, 3 unchanged" in out
    assert list(Problem.objects.values_list("id", "updated_at")) == before


def test_a_changed_source_is_updated(checkout):
    run(str(checkout))
    path = checkout / "KernelBench/level1/1_Square_matrix_multiplication_.py"
    path.write_text(PROBLEM_SOURCE.replace("N = 64", "N = 128"))
    out, _ = run(str(checkout))
    assert "1 updated" in out
    assert "N = 128" in Problem.objects.get(level=1, number=1).source


def test_a_file_without_get_init_inputs_is_reported_not_imported(tmp_path):
    bad = PROBLEM_SOURCE.replace("def get_init_inputs", "def something_else")
    write_checkout(tmp_path, {"level1/1_Good.py": PROBLEM_SOURCE, "level1/2_Bad.py": bad})
    _, err = run(str(tmp_path))
    assert "2_Bad.py: does not define get_init_inputs" in err
    assert list(Problem.objects.values_list("number", flat=True)) == [1]


def test_a_syntax_error_names_file_and_line_and_writes_nothing(tmp_path):
    write_checkout(tmp_path, {"level1/1_Good.py": PROBLEM_SOURCE, "level1/2_Broken.py": "import torch\ndef (:\n"})
    with pytest.raises(CommandError, match=r"2_Broken\.py:2: not valid Python"):
        run(str(tmp_path))
    assert not Problem.objects.exists() and not ProblemSet.objects.exists()


def test_a_folder_without_levels_is_an_error(tmp_path):
    with pytest.raises(CommandError, match="no level1/"):
        run(str(tmp_path))


def test_a_missing_path_is_an_error(tmp_path):
    with pytest.raises(CommandError, match="no such file"):
        run(str(tmp_path / "nope"))


def test_the_starter_catalogue_imports_with_every_level():
    from problems.catalogue import CATALOGUE_DIR

    run(str(CATALOGUE_DIR), "--set", "Starter")
    levels = set(Problem.objects.values_list("level", flat=True))
    assert levels == {1, 2, 3, 4}
    assert Problem.objects.count() >= 12


def test_progress_is_shown_on_long_imports(tmp_path):
    files = {f"level1/{n}_P{n}.py": PROBLEM_SOURCE for n in range(1, 41)}
    write_checkout(tmp_path, files)
    out, _ = run(str(tmp_path))
    assert "problems: 40/40" in out


def test_a_hugging_face_problem_is_marked_as_needing_transformers_and_weights(tmp_path):
    write_checkout(tmp_path, {"level1/1_Good.py": PROBLEM_SOURCE, "level4/1_bigbird.py": HF_PROBLEM_SOURCE})
    out, _ = run(str(tmp_path))
    tags = Problem.objects.get(level=4, number=1).tag_list
    assert "needs-transformers" in tags and "needs-weights" in tags
    assert not any(tag.startswith("needs-") for tag in Problem.objects.get(level=1, number=1).tag_list)
    assert "1 of them need more than PyTorch" in out
