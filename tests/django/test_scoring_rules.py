"""KernelBench's rules per version: a problem set carries them, a run records them, the worker
applies them, a re-score changes them and keeps the earlier verdicts, and pages say which."""

import io
import zipfile
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from evaluation import evaluate
from leaderboard.evaluations.jobs import load_inputs as _load
from leaderboard.evaluations.queue import request_evaluation
from leaderboard.models import Evaluation, Kernel
from problems.models import Hardware, Problem, ProblemSet, ScoringRules
from tests.django.conftest import write_checkout
from tests.pagekit import make_hardware, make_run, make_set
from tests.sources import PROBLEM_SOURCE

pytestmark = pytest.mark.django_db

# Off by 2e-3 everywhere: inside KernelBench v0.1's fp32 tolerance (1e-2), outside main's (1e-4).
OFF_BY_2E3 = PROBLEM_SOURCE.replace("class Model(", "class ModelNew(").replace(
    "return torch.matmul(a, b)", "return torch.matmul(a, b) + 2e-3"
)


def _kernel_under(rules_version: str) -> Kernel:
    problem_set = ProblemSet.objects.create(
        name=f"KB {rules_version}", slug=f"kb-{rules_version}".replace(".", ""),
        rules=ScoringRules.objects.for_version(rules_version),
    )  # fmt: skip
    problem = Problem.objects.create(problem_set=problem_set, level=1, number=1, name="Matmul", source=PROBLEM_SOURCE)
    cpu, _ = Hardware.objects.get_or_create(slug="cpu", defaults={"name": "CPU", "kind": Hardware.Kind.CPU})
    run = make_run(problem_set, [], hardware=cpu)
    return Kernel.objects.create(run=run, problem=problem, source=OFF_BY_2E3)


def test_presets_hold_kernelbenchs_published_tolerances():
    v01, main = ScoringRules.objects.for_version("v0.1"), ScoringRules.objects.for_version("main")
    assert (v01.tolerance("fp32"), v01.tolerance("bf16"), v01.correctness_trials) == (1e-2, 1e-2, 5)
    assert (main.tolerance("fp32"), main.tolerance("fp16"), main.correctness_trials) == (1e-4, 1e-2, 5)


def test_a_new_set_takes_the_current_rules_and_a_run_its_sets_rules():
    problem_set = make_set(levels=(1,))
    assert problem_set.rules.slug == "kernelbench-main"
    problem_set.rules = ScoringRules.objects.for_version("v0")
    problem_set.save()
    assert make_run(problem_set, []).rules.slug == "kernelbench-v0"


@pytest.mark.slow
def test_an_error_of_2e3_is_correct_under_v01_rules_and_incorrect_under_current_rules(settings):
    settings.EVAL_TIMING_TRIALS = 2
    verdicts = {}
    for version in ("v0.1", "main"):
        kernel = _kernel_under(version)
        evaluation = request_evaluation(kernel, kernel.run.hardware)
        assert evaluation.rules == kernel.run.rules
        problem_source, kernel_source, config = _load(evaluation.pk)
        verdicts[version] = evaluate(problem_source, kernel_source, config).status
    assert verdicts == {"v0.1": "correct", "main": "incorrect"}


def test_rescoring_records_the_new_rules_queues_every_kernel_and_keeps_earlier_verdicts(
    django_capture_on_commit_callbacks,
):
    run = make_run(make_set(levels=(1, 1)), [1.5, None], hardware=make_hardware("cpu"))
    earlier = set(Evaluation.objects.filter(kernel__run=run).values_list("pk", flat=True))
    out = StringIO()
    with django_capture_on_commit_callbacks(execute=False):
        call_command("rescore_run", str(run.pk), "--rules", "v0.1", stdout=out)
    run.refresh_from_db()
    assert run.rules.slug == "kernelbench-v0-1" and "queued 2 evaluations" in out.getvalue()
    queued = Evaluation.objects.filter(kernel__run=run).exclude(pk__in=earlier)
    assert queued.count() == 2 and set(queued.values_list("rules__slug", flat=True)) == {"kernelbench-v0-1"}
    assert Evaluation.objects.filter(pk__in=earlier).count() == 2


def test_rescoring_under_unknown_rules_says_which_exist():
    run = make_run(make_set(levels=(1,)), [1.0])
    with pytest.raises(CommandError, match="known: .*kernelbench-main"):
        call_command("rescore_run", str(run.pk), "--rules", "v9", stdout=StringIO())


def test_the_run_page_and_api_say_which_rules_the_run_used(client):
    run = make_run(make_set(levels=(1,)), [1.2])
    run.rules = ScoringRules.objects.for_version("v0.1")
    run.save()
    page = client.get(run.get_absolute_url()).content.decode()
    assert "KernelBench v0.1: tolerance 0.01 fp32" in page and "re-scored" in page
    body = client.get(reverse("api:run-detail", args=[run.pk])).json()
    assert body["rules"]["kernelbench_version"] == "v0.1" and body["rules"]["tolerance"]["fp32"] == 1e-2


def test_the_level_board_marks_rows_scored_under_other_rules_than_their_sets(client):
    problem_set = make_set(levels=(1,))
    same = make_run(problem_set, [1.2])
    rescored = make_run(problem_set, [1.3])
    rescored.rules = ScoringRules.objects.for_version("v0.1")
    rescored.save()
    url = reverse("level-board", args=["1"]) + f"?set={problem_set.slug}"
    with CaptureQueriesContext(connection) as two_runs:
        page = client.get(url).content.decode()
    assert page.count('class="small run-rules"') == 1
    assert 'data-rules="kernelbench-v0-1"' in page and "scored under KernelBench v0.1" in page
    assert f'data-run="{same.pk}"' in page and f'data-run="{rescored.pk}"' in page
    for _ in range(6):  # more runs, re-scored under yet other rules: no query per row
        extra = make_run(problem_set, [1.1])
        extra.rules = ScoringRules.objects.for_version("v0")
        extra.save()
    with CaptureQueriesContext(connection) as eight_runs:
        page = client.get(url).content.decode()
    assert page.count('class="small run-rules"') == 7
    assert len(eight_runs.captured_queries) <= len(two_runs.captured_queries) + 1, (
        len(two_runs.captured_queries),
        len(eight_runs.captured_queries),
    )


def _import(path: Path, *args: str) -> str:
    out = StringIO()
    call_command("import_problems", str(path), *args, stdout=out)
    return out.getvalue()


def test_import_problems_infers_the_version_from_the_checkout(tmp_path):
    write_checkout(tmp_path, {"level1/1_Matmul.py": PROBLEM_SOURCE})
    (tmp_path / "KernelBench" / "changelog").mkdir()
    (tmp_path / "KernelBench" / "changelog" / "v0.1").write_text("release note")
    assert "KernelBench version v0.1" in _import(tmp_path, "--set", "Old")
    assert ProblemSet.objects.get(name="Old").rules.slug == "kernelbench-v0-1"
    harness = tmp_path / "src" / "kernelbench" / "eval.py"
    harness.parent.mkdir(parents=True)
    harness.write_text("def get_tolerance_for_precision(precision): ...\n")
    assert "KernelBench version main" in _import(tmp_path, "--set", "New")
    assert ProblemSet.objects.get(name="New").rules.slug == "kernelbench-main"


def test_import_problems_changes_an_existing_sets_rules_only_when_asked(tmp_path):
    write_checkout(tmp_path, {"level1/1_Matmul.py": PROBLEM_SOURCE})
    _import(tmp_path, "--set", "S")
    assert ProblemSet.objects.get(name="S").rules.slug == "kernelbench-v0"
    harness = tmp_path / "src" / "eval.py"
    harness.parent.mkdir(parents=True)
    harness.write_text("get_tolerance_for_precision\n")
    assert "keeps its rules" in _import(tmp_path, "--set", "S")
    assert "rules changed" in _import(tmp_path, "--set", "S", "--kernelbench-version", "main")
    assert ProblemSet.objects.get(name="S").rules.slug == "kernelbench-main"


def test_the_export_names_the_rules(client):
    run = make_run(make_set(levels=(1,)), [1.2])
    response = client.get(reverse("api:run-export", args=[run.pk]))
    assert response.status_code == 200
    with zipfile.ZipFile(
        io.BytesIO(b"".join(response.streaming_content) if response.streaming else response.content)
    ) as z:
        config = next(name for name in z.namelist() if name.endswith("generation_config.yaml"))
        assert "kernelbench-main" in z.read(config).decode()
