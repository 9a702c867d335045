"""import_kernelbench_leaderboard: KernelBench's original public leaderboard, read from a small
synthetic folder in its layout (docs/assets/data.json, solutions/, problems/), written here by the
test (issue 21.5)."""

import hashlib
import io
import json
import re

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from leaderboard.evaluations.attempts import refresh_latest_evaluation
from leaderboard.evaluations.queue import EvaluationRefused, request_evaluations
from leaderboard.ingest.kernelbench_leaderboard import LEADERBOARD_SET_SLUG, PUBLISHED_SETTING
from leaderboard.models import Evaluation, ImmutableSourceError, Kernel, LanguageModel, ModelAlias, PublishedFigure, Run
from leaderboard.reviews.services import record_verdict
from problems.models import Hardware, ProblemSet
from tests.pagekit import plain_static  # noqa: F401
from tests.rescoring import run_rescorer
from tests.sources import PROBLEM_SOURCE

pytestmark = pytest.mark.django_db
KERNEL = "import torch\nimport torch.nn as nn\n\nclass ModelNew(nn.Module):\n    def forward(self, a, b):\n        return a @ b\n"
# The leaderboard's level 1 problem 2 is an older text than the KernelBench checkout's (N = 32 there).
OLD_PROBLEM_2 = PROBLEM_SOURCE.replace("N = 64", "N = 16")


def raw_entry(model, display, level, problem_id, file, speedup, **more):
    """One raw_data.json entry: problem_id counts from 0 (problem 1 is problem_id 0)."""
    entry = {
        "problem_id": problem_id, "level": level, "model": model, "display_name": display, "file": file,
        "code": KERNEL.replace("a @ b", f"a @ b  # {file}"), "torch_speedup": speedup,
        "torch_compile_speedup": speedup / 2, "baseline_torch_time": 2.0, "baseline_torch_compile_time": 1.0,
        "kernel_eval_time": 2.0 / speedup,
    }  # fmt: skip
    return {**entry, **more}


O1 = ("o1-preview-2024-09-12", "gpt-o1")
SONNET = ("claude-3-5-sonnet-20241022", "claude-3.5-sonnet")
RAW = [
    raw_entry(*O1, 1, 0, "aaa1", 1.5),
    raw_entry(*SONNET, 1, 0, "bbb1", 0.5),
    raw_entry(*O1, 1, 1, "aaa2", 2.25),
    # Not ranked by data.json (the page shows the top 5 only), and a claim above the flag threshold.
    raw_entry(*SONNET, 1, 1, "bbb2", 12.5),
]


def write_leaderboard(root, data=None, solutions=None, raw=None):
    assets = root / "KernelBenchLeaderboard" / "docs" / "assets"
    (assets / "solutions").mkdir(parents=True)
    (assets / "problems").mkdir()
    data = data or {
        "Level 1: 1_Square_matrix_multiplication_": [
            {"display_name": "gpt-o1", "torch_speedup": 1.5, "file": "aaa1"},
            {"display_name": "claude-3.5-sonnet", "torch_speedup": 0.5, "file": "bbb1"},
        ],
        "Level 1: 2_Standard_matrix_multiplication_": [
            {"display_name": "gpt-o1", "torch_speedup": 2.25, "file": "aaa2"}
        ],
        "Level 2: 1_Conv2D_ReLU_BiasAdd": [],
    }
    raw = RAW if raw is None else raw
    (assets / "data.json").write_text(json.dumps(data))
    (assets / "raw_data.json").write_text(json.dumps(raw))
    problems = {
        "l1_p1.py": PROBLEM_SOURCE,
        "l1_p2.py": OLD_PROBLEM_2,
        "l2_p1.py": PROBLEM_SOURCE.replace("torch.matmul(a, b)", "torch.relu(a + b)"),
    }
    for name, source in problems.items():
        (assets / "problems" / name).write_text(source)
    by_file = {entry["file"]: entry["code"] for entry in raw}
    for name in solutions if solutions is not None else by_file:
        (assets / "solutions" / f"{name}.py").write_text(by_file.get(name, KERNEL))
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


def test_it_imports_one_run_per_model_with_every_published_kernel(leaderboard):
    out = run_command(leaderboard)
    assert "2 runs, 4 kernels, 2 problems matched, 1 not comparable" in out
    runs = {run.model.name: run for run in Run.objects.select_related("model__lab", "problem_set", "hardware")}
    assert sorted(runs) == ["Claude 3.5 Sonnet", "o1-preview"]  # by the known aliases (data/model_aliases.csv)
    o1 = runs["o1-preview"]
    assert re.search(r"run \d+ o1-preview: L1 2; kernels: 2 created", out)
    assert o1.problem_set.slug == LEADERBOARD_SET_SLUG and o1.setting == PUBLISHED_SETTING
    assert o1.origin == "imported" and o1.published_source and o1.model.lab.name == "OpenAI"
    assert o1.problem_set.rules.kernelbench_version == "v0" and o1.hardware.slug == "h200"
    figures = {(k.problem.number, k.published_speedup, k.published_hardware) for k in o1.kernels.all()}
    assert figures == {(1, 1.5, "L40S"), (2, 2.25, "L40S")}  # problem_id 0 and 1 are problems 1 and 2


def test_published_figures_are_never_measurements(leaderboard):
    run_command(leaderboard)
    assert not Evaluation.objects.exists()  # nothing scored until `verify` measures here
    assert all(k.latest_speedup is None for k in Kernel.objects.all())


def test_a_changed_problem_keeps_the_leaderboards_own_text(leaderboard):
    out = run_command(leaderboard)
    kernel = Kernel.objects.get(run__model__name="o1-preview", problem__number=2, problem__level=1)
    assert kernel.problem.source == OLD_PROBLEM_2  # not KernelBench v0.1's N = 32 text
    assert kernel.problem.problem_set.slug == LEADERBOARD_SET_SLUG
    assert re.search(r"not comparable: L1 #2\b", out)
    assert "1 are not comparable" in ProblemSet.objects.get(slug=LEADERBOARD_SET_SLUG).description


def test_a_second_import_changes_nothing(leaderboard):
    run_command(leaderboard)
    out = run_command(leaderboard)
    assert "problems: 0 created, 0 updated, 3 unchanged" in out
    assert "kernels: 0 created" in out and "written or changed: 0" in out
    assert Run.objects.count() == 2 and Kernel.objects.count() == 4 and PublishedFigure.objects.count() == 4


def test_malformed_input_names_the_fault_and_writes_nothing(imported_checkout, tmp_path):
    Hardware.objects.create(slug="h200", name="NVIDIA H200")
    unlisted = write_leaderboard(tmp_path / "a", raw=RAW[:2])  # data.json ranks aaa2, raw_data.json lacks it
    with pytest.raises(CommandError, match=r"data.json ranks aaa2, which raw_data.json does not hold"):
        run_command(unlisted)
    escaping = write_leaderboard(tmp_path / "b", raw=[*RAW, raw_entry(*O1, 2, 0, "../../x", 1.0)])
    with pytest.raises(CommandError, match="file must be a solution's name"):
        run_command(escaping)
    # problem_id counts from 0: a kernel data.json ranks under problem 1 must say problem_id 0.
    shifted = write_leaderboard(tmp_path / "c", raw=[raw_entry(*O1, 1, 1, "aaa1", 1.5), *RAW[1:]])
    with pytest.raises(CommandError, match=r"data.json ranks aaa1 under level 1 problem 1, not problem_id 1 \+ 1"):
        run_command(shifted)
    assert not ProblemSet.objects.filter(slug=LEADERBOARD_SET_SLUG).exists() and not Run.objects.exists()


def test_the_board_and_the_run_page_say_what_such_a_run_is(client, leaderboard):
    run_command(leaderboard)
    run_rescorer()  # what the command's commit (or the background re-scorer) does
    o1 = Run.objects.get(model__name="o1-preview")
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
    o1 = Run.objects.get(model__name="o1-preview")
    kernels = client.get(f"/api/v1/kernels/?run={o1.pk}").json()["results"]
    assert sorted(k["published"]["speedup"] for k in kernels) == [1.5, 2.25]
    assert {k["published"]["label"] for k in kernels} == {"published, L40S"} and all(
        k["latest_evaluation"] is None for k in kernels
    )
    assert client.get(f"/api/v1/runs/{o1.pk}/").json()["published_source"].startswith("KernelBench's original")


# --- issue 26: every published kernel, its figures on the L40S, one record per model -----------


def test_each_kernel_has_its_published_figures_on_the_gpu_they_were_timed_on(leaderboard):
    run_command(leaderboard)
    figures = {
        f"{f.kernel.run.model.name}#{f.kernel.problem.number}": f
        for f in PublishedFigure.objects.select_related("kernel__run__model", "kernel__problem", "hardware")
    }
    sonnet_2 = figures["Claude 3.5 Sonnet#2"]
    assert sonnet_2.hardware.slug == "l40s" and sonnet_2.kernel.run.hardware.slug == "h200"
    assert (sonnet_2.correct, sonnet_2.speedup_eager, sonnet_2.speedup_compile) == (True, 12.5, 6.25)
    assert (sonnet_2.runtime_ms, sonnet_2.reference_eager_ms, sonnet_2.reference_compile_ms) == (0.16, 2.0, 1.0)
    assert not sonnet_2.ranked_by_source  # data.json does not list it
    assert figures["o1-preview#1"].ranked_by_source and figures["Claude 3.5 Sonnet#1"].ranked_by_source


def test_models_attach_to_the_records_that_exist_by_exact_alias_only(leaderboard):
    sonnet = LanguageModel.objects.create(name="Claude 3.5 Sonnet")
    o1 = LanguageModel.objects.create(name="OpenAI o1")  # the paper's o1: not o1-preview
    run_command(leaderboard)
    assert set(Run.objects.values_list("model__name", flat=True)) == {"Claude 3.5 Sonnet", "o1-preview"}
    assert Run.objects.filter(model=sonnet).count() == 1 and not Run.objects.filter(model=o1).exists()
    assert not LanguageModel.objects.filter(slug__startswith="claude-35-sonnet-").exists()
    assert set(sonnet.aliases.values_list("alias", flat=True)) == {"claude-3-5-sonnet-20241022", "claude-3.5-sonnet"}
    assert set(ModelAlias.objects.filter(model__name="o1-preview").values_list("alias", flat=True)) == {
        "o1-preview-2024-09-12",
        "gpt-o1",
    }


def test_a_published_claim_above_the_flag_threshold_is_queued_for_review(client, leaderboard, reviewer):
    run_command(leaderboard)
    run_rescorer()  # what the commit's callback does (the test's transaction never commits)
    claim = Kernel.objects.get(published_speedup=12.5)
    assert list(Kernel.objects.needing_review()) == [claim]  # 12.5x > 10x; 2.25x is not
    client.force_login(reviewer)
    queue = client.get("/review/").content.decode()
    row = queue[queue.index(f'data-kernel="{claim.pk}"') :]
    row = row[: row.index("</tr>")]
    assert "claimed 12.50x (published, L40S)" in row and "published claim above 10x, not measured here yet" in row
    record_verdict(claim, "clean", "looked at the claim", by=reviewer)
    run_rescorer()
    assert not Kernel.objects.needing_review().exists()
    # Re-measured here (a GPU is mocked away: the worker's store is what matters): back in the queue, with it.
    evaluation = Evaluation.objects.create(
        kernel=claim, hardware=claim.run.hardware, state="done", status="correct", compiled=True, correct=True,
        speedup=1.1, finished_at=timezone.now(), rules=claim.run.rules,
    )  # fmt: skip
    refresh_latest_evaluation(claim.pk)
    run_rescorer()
    assert list(Kernel.objects.needing_review()) == [claim]
    page = client.get(claim.get_absolute_url()).content.decode()
    assert "its published speedup (12.5x, published, L40S) is above 10x; measured here: 1.1x" in page
    assert evaluation.pk


def test_the_figures_file_loads_the_field_without_code_and_the_checkout_fills_it_in(client, leaderboard, tmp_path):
    figures = tmp_path / "figures.json"
    call_command(
        "export_field_figures", str(leaderboard), "--commit", "c" * 40, "--out", str(figures), stdout=io.StringIO()
    )
    text = figures.read_text()
    assert "import torch" not in text and "ModelNew" not in text and "torch.matmul" not in text  # no code at all
    out = run_command(figures)
    assert "(figures only, no code)" in out and "2 runs, 4 kernels" in out
    kernel = Kernel.objects.get(published_speedup=2.25)
    assert kernel.source == "" and kernel.source_withheld and kernel.problem.source_withheld
    assert (
        kernel.source_url
        == f"https://github.com/anneouyang/KernelBenchLeaderboard/blob/{'c' * 40}/docs/assets/solutions/aaa2.py"
    )
    assert PublishedFigure.objects.count() == 4 and PublishedFigure.objects.filter(ranked_by_source=True).count() == 3
    page = client.get(kernel.get_absolute_url()).content.decode()
    assert (
        f'href="{kernel.source_url}"' in page
        and "import_kernelbench_leaderboard" in page
        and 'id="kernel-source"' not in page
    )
    assert "problem-withheld-source" in client.get(kernel.problem.get_absolute_url()).content.decode()
    with pytest.raises(EvaluationRefused, match="stored without its source"):
        request_evaluations([kernel], kernel.run.hardware)
    assert "queued 0" in run_command(figures, "--verify")  # nothing with code to verify yet
    out = run_command(leaderboard)  # the checkout: the same kernels get their code (the hashes match)
    kernel.refresh_from_db()
    assert (
        kernel.source.startswith("import torch")
        and kernel.source_hash == hashlib.sha256(kernel.source.encode()).hexdigest()
    )
    assert Kernel.objects.count() == 4 and not Kernel.objects.filter(source="").exists()
    assert "problems: 0 created, 3 updated" in out
    with pytest.raises(ImmutableSourceError):
        kernel.source = ""
        kernel.save()


def test_verify_queues_part_of_the_field_and_goes_on_where_it_stopped(leaderboard):
    run_command(leaderboard)
    out = run_command(leaderboard, "--verify", "--levels", "1", "--limit", "3")
    assert "verify: queued 3 on h200; 1 more not yet measured there" in out
    first = set(Evaluation.objects.values_list("kernel_id", flat=True))
    # The highest published claims are measured first: the one left is the level's lowest claim.
    claims = sorted(Kernel.objects.filter(problem__level=1).values_list("published_speedup", flat=True))
    assert sorted(Kernel.objects.filter(pk__in=first).values_list("published_speedup", flat=True)) == claims[1:]
    out = run_command(leaderboard, "--verify", "--levels", "1", "--limit", "3")
    assert "verify: queued 1 on h200; 0 more" in out
    assert len(first | set(Evaluation.objects.values_list("kernel_id", flat=True))) == 4
    assert set(Evaluation.objects.values_list("hardware__slug", flat=True)) == {"h200"}


def test_verify_can_be_told_which_problems(leaderboard):
    run_command(leaderboard)
    out = run_command(leaderboard, "--verify", "--problems", "1/2")
    assert "verify: queued 2 on h200; 0 more not yet measured there" in out
    assert set(Evaluation.objects.values_list("kernel__problem__number", flat=True)) == {2}
    out = run_command(leaderboard, "--verify", "--problems", "1/1", "2/1")  # level 2's problem has none
    assert "verify: queued 2 on h200; 0 more" in out
    assert Evaluation.objects.count() == 4
    with pytest.raises(CommandError, match="LEVEL/NUMBER"):
        run_command(leaderboard, "--verify", "--problems", "9/1")
