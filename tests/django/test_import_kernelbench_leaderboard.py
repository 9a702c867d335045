"""import_kernelbench_leaderboard: KernelBench's original public leaderboard, read from a small
synthetic folder in its layout (docs/assets/data.json, solutions/, problems/), written here by the
test (issue 21.5)."""

import io
import json
import re

import pytest
from django.core.management import CommandError, call_command

from leaderboard.ingest.kernelbench_leaderboard import LEADERBOARD_SET_SLUG, PUBLISHED_SETTING
from leaderboard.models import Evaluation, Kernel, Run
from problems.models import Hardware, ProblemSet
from tests.pagekit import plain_static  # noqa: F401
from tests.sources import PROBLEM_SOURCE

pytestmark = pytest.mark.django_db
KERNEL = "import torch\nimport torch.nn as nn\n\nclass ModelNew(nn.Module):\n    def forward(self, a, b):\n        return a @ b\n"
# The leaderboard's level 1 problem 2 is an older text than the KernelBench checkout's (N = 32 there).
OLD_PROBLEM_2 = PROBLEM_SOURCE.replace("N = 64", "N = 16")


def write_leaderboard(root, data=None, solutions=None):
    assets = root / "KernelBenchLeaderboard" / "docs" / "assets"
    (assets / "solutions").mkdir(parents=True)
    (assets / "problems").mkdir()
    data = data or {
        "Level 1: 1_Square_matrix_multiplication_": [
            {"display_name": "gpt-o1", "torch_speedup": 1.5, "file": "aaa1"},
            {"display_name": "claude-3.5-sonnet", "torch_speedup": 0.5, "file": "bbb1"},
        ],
        "Level 1: 2_Standard_matrix_multiplication_": [{"display_name": "gpt-o1", "torch_speedup": 2.25, "file": "aaa2"}],
        "Level 2: 1_Conv2D_ReLU_BiasAdd": [],
    }
    (assets / "data.json").write_text(json.dumps(data))
    problems = {
        "l1_p1.py": PROBLEM_SOURCE,
        "l1_p2.py": OLD_PROBLEM_2,
        "l2_p1.py": PROBLEM_SOURCE.replace("torch.matmul(a, b)", "torch.relu(a + b)"),
    }
    for name, source in problems.items():
        (assets / "problems" / name).write_text(source)
    for name in solutions if solutions is not None else ("aaa1", "bbb1", "aaa2"):
        (assets / "solutions" / f"{name}.py").write_text(KERNEL.replace("a @ b", f"a @ b  # {name}"))
    return root / "KernelBenchLeaderboard"


def run_command(path, *args) -> str:
    out = io.StringIO()
    call_command("import_kernelbench_leaderboard", str(path), "--hardware", "h200", *args, stdout=out)
    return out.getvalue()


@pytest.fixture
def leaderboard(imported_checkout, tmp_path):
    """KernelBench v0.1 imported from a checkout, an H200, and the leaderboard's folder."""
    Hardware.objects.create(slug="h200", name="NVIDIA H200")
    return write_leaderboard(tmp_path / "lb")


def test_it_imports_one_run_per_model_with_its_listed_kernels(leaderboard):
    out = run_command(leaderboard)
    assert "2 runs, 3 kernels, 2 problems matched, 1 not comparable" in out
    runs = {run.model.name: run for run in Run.objects.select_related("model__lab", "problem_set")}
    assert sorted(runs) == ["claude-3.5-sonnet", "gpt-o1"]
    o1 = runs["gpt-o1"]
    assert o1.problem_set.slug == LEADERBOARD_SET_SLUG and o1.setting == PUBLISHED_SETTING
    assert o1.origin == "imported" and o1.published_source and o1.model.lab.name == "OpenAI"
    assert o1.problem_set.rules.kernelbench_version == "v0"
    figures = {(k.problem.number, k.published_speedup, k.published_hardware) for k in o1.kernels.all()}
    assert figures == {(1, 1.5, "L40S"), (2, 2.25, "L40S")}


def test_published_figures_are_never_measurements(leaderboard):
    run_command(leaderboard)
    assert not Evaluation.objects.exists()  # nothing scored until `verify` measures here
    assert all(k.latest_speedup is None for k in Kernel.objects.all())


def test_a_changed_problem_keeps_the_leaderboards_own_text(leaderboard):
    out = run_command(leaderboard)
    kernel = Kernel.objects.get(run__model__name="gpt-o1", problem__number=2, problem__level=1)
    assert kernel.problem.source == OLD_PROBLEM_2  # not KernelBench v0.1's N = 32 text
    assert kernel.problem.problem_set.slug == LEADERBOARD_SET_SLUG
    assert re.search(r"not comparable: L1 #2\b", out)
    assert "1 are not comparable" in ProblemSet.objects.get(slug=LEADERBOARD_SET_SLUG).description


def test_a_second_import_changes_nothing(leaderboard):
    run_command(leaderboard)
    out = run_command(leaderboard)
    assert "problems: 0 created, 0 updated, 3 unchanged" in out
    assert "kernels: 0 created" in out and "written or changed: 0" in out
    assert Run.objects.count() == 2 and Kernel.objects.count() == 3


def test_malformed_input_names_the_fault_and_writes_nothing(imported_checkout, tmp_path):
    Hardware.objects.create(slug="h200", name="NVIDIA H200")
    missing = write_leaderboard(tmp_path / "a", solutions=("aaa1", "bbb1"))
    with pytest.raises(CommandError, match=r"no solution file .*aaa2\.py"):
        run_command(missing)
    escaping = write_leaderboard(
        tmp_path / "b", data={"Level 1: 1_X": [{"display_name": "m", "torch_speedup": 1.0, "file": "../../x"}]}
    )
    with pytest.raises(CommandError, match="file must be a solution's name"):
        run_command(escaping)
    assert not ProblemSet.objects.filter(slug=LEADERBOARD_SET_SLUG).exists() and not Run.objects.exists()


def test_the_board_and_the_run_page_say_what_such_a_run_is(client, leaderboard):
    run_command(leaderboard)
    o1 = Run.objects.get(model__name="gpt-o1")
    board = client.get(f"/levels/1/?set={LEADERBOARD_SET_SLUG}&p=2").content.decode()
    assert 'id="published-explained"' in board and "counts as failed" in board
    assert f'data-published="{o1.pk}"' in board
    row = board[board.index(f'data-run="{o1.pk}"') :]
    row = row[: row.index("</tr>")]
    # Nothing measured here yet: the row ranks by its published figure, labelled so, and its
    # hardware is the GPU that figure was timed on (2.25x of 1.5x and 2.25x: 1 of 2 problems).
    headline = row[row.index('data-key="fast_2"') :]
    assert headline.startswith('data-key="fast_2" class="num sorted picked" data-ranked-by="published"')
    assert "50.0%" in headline[: headline.index("</td>")] and "published, L40S" in headline[: headline.index("</td>")]
    assert '<td data-key="hardware" class="">L40S</td>' in row
    page = client.get(o1.get_absolute_url()).content.decode()
    assert 'id="run-published-source"' in page and "counts as failed" in page
    assert "Published figures (published, L40S)" in page and "2.25x" in page and "L1 100.0%" in page
    kernel = o1.kernels.get(problem__number=2)
    assert "published, L40S" in client.get(kernel.get_absolute_url()).content.decode()


def test_the_api_gives_the_published_figure_apart(client, leaderboard):
    run_command(leaderboard)
    o1 = Run.objects.get(model__name="gpt-o1")
    kernels = client.get(f"/api/v1/kernels/?run={o1.pk}").json()["results"]
    assert sorted(k["published"]["speedup"] for k in kernels) == [1.5, 2.25]
    assert {k["published"]["label"] for k in kernels} == {"published, L40S"} and all(
        k["latest_evaluation"] is None for k in kernels
    )
    assert client.get(f"/api/v1/runs/{o1.pk}/").json()["published_source"].startswith("KernelBench's original")
