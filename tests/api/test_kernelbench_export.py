"""A run out as a KernelBench run folder (zip) and back in: same files, KernelBench's shapes, same
scores; and KernelBench's own formulas (score.py, benchmark_eval_analysis.py) on the export give
the site's fast_p."""

from __future__ import annotations

import io
import json
import zipfile

import numpy as np
import pytest
import yaml

from leaderboard.ingest.archives import read_zip
from leaderboard.ingest.kernelbench_export import export_run
from leaderboard.ingest.run_import import RunSpec, store_run
from leaderboard.models import Run
from leaderboard.reads import runs as reads
from problems.models import Baseline
from tests.api.conftest import KERNEL

pytestmark = pytest.mark.django_db
ENTRY_KEYS = {"sample_id", "compiled", "correctness", "metadata", "runtime", "runtime_stats"}


def kernelbench_zip(results: dict) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for number, entries in results.items():
            for entry in entries:
                archive.writestr(f"my_run/level_1_problem_{number}_sample_{entry['sample_id']}_kernel.py", KERNEL)
        archive.writestr("my_run/eval_results.json", json.dumps(results))
    return buffer.getvalue()


@pytest.fixture
def imported_run(problem_set, hardware) -> Run:
    """Level 1 of the set, imported: problem 1 sample 0 at 2 ms (baseline 3 ms: 1.5x), sample 1
    faster; problem 2 sample 0 compiled but incorrect."""
    for problem in problem_set.problems.filter(level=1):
        Baseline.objects.create(problem=problem, hardware=hardware, mean_ms=3.0)
    entry = {"compiled": True, "metadata": {}, "runtime_stats": {"mean": 2.0, "std": 0.1}}
    results = {
        "1": [entry | {"sample_id": 0, "correctness": True, "runtime": 2.0},
              entry | {"sample_id": 1, "correctness": True, "runtime": 1.0}],
        "2": [entry | {"sample_id": 0, "correctness": False, "runtime": -1.0}],
    }  # fmt: skip
    spec = RunSpec(model="Exporter", hardware=hardware, problem_set=problem_set, name="my run")
    return store_run(spec, read_zip(io.BytesIO(kernelbench_zip(results))), by="manage.py test").run


def unpack(data: bytes) -> dict[str, str]:
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        return {info.filename: archive.read(info).decode() for info in archive.infolist()}


def test_the_export_is_a_kernelbench_run_folder(imported_run):
    files = unpack(export_run(imported_run))
    assert sorted(files) == [
        "my-run/baseline_time.json",
        "my-run/eval_results.json",
        "my-run/generation_config.yaml",
        "my-run/level_1_problem_1_sample_0_kernel.py",
        "my-run/level_1_problem_1_sample_1_kernel.py",
        "my-run/level_1_problem_2_sample_0_kernel.py",
    ]
    results = json.loads(files["my-run/eval_results.json"])
    assert list(results) == ["1", "2"]
    assert all(set(entry) == ENTRY_KEYS for entries in results.values() for entry in entries)
    assert [e["sample_id"] for e in results["1"]] == [0, 1]
    assert results["1"][0]["runtime"] == 2.0 and results["2"][0] == results["2"][0] | {
        "correctness": False,
        "runtime": -1.0,
    }
    config = yaml.safe_load(files["my-run/generation_config.yaml"])
    assert config["model_name"] == "Exporter" and config["level"] == 1 and config["num_samples"] == 2


def test_export_then_import_gives_the_same_scores(imported_run, problem_set, hardware):
    spec = RunSpec(model="Exporter", hardware=hardware, problem_set=problem_set, name="round trip")
    again = store_run(spec, read_zip(io.BytesIO(export_run(imported_run))), by="manage.py test").run
    assert again.pk != imported_run.pk
    before = reads.run_scores(imported_run, reads.run_problems(imported_run))
    after = reads.run_scores(again, reads.run_problems(again))
    assert [s.as_dict() for s in after] == [s.as_dict() for s in before]
    assert before[0].fast_p["fast_1"] == 0.5 and before[0].best_of_n["fast_2"] == 0.5


def kernelbench_analysis(files: dict[str, str], folder: str, level: int, n_problems: int) -> dict[str, float]:
    """scripts/benchmark_eval_analysis.py's steps with src/kernelbench/score.py's fastp, transcribed:
    sample 0 only, missing problems patched as failed, speedup = baseline mean / runtime."""
    results = json.loads(files[f"{folder}/eval_results.json"])
    baselines = json.loads(files[f"{folder}/baseline_time.json"])[f"level{level}"]
    firsts = {key: next(e for e in entries if e["sample_id"] == 0) for key, entries in results.items()}
    names = sorted(baselines, key=lambda name: int(name.split("_", 1)[0]))
    assert len(names) == n_problems
    failed = {"correctness": False, "runtime": -1.0}
    entries = [firsts.get(name.split("_", 1)[0], failed) for name in names]
    is_correct = np.array([e["correctness"] for e in entries])
    baseline_speed = np.array([baselines[name]["mean"] for name in names])
    actual_speed = np.array([e["runtime"] for e in entries])
    speed_up = baseline_speed[is_correct] / actual_speed[is_correct]
    return {str(p): float(np.sum(speed_up > p) / len(names)) for p in (0.0, 0.5, 0.8, 1.0, 1.5, 2.0)}


def test_kernelbench_formulas_on_the_export_give_the_sites_fast_p(run):
    """A measured run (conftest: problem 1 correct at 2x, problem 2 incorrect)."""
    files = unpack(export_run(run, level=1))
    (score,) = reads.run_scores(run, reads.run_problems(run))
    folder = next(iter(files)).split("/")[0]
    theirs = kernelbench_analysis(files, folder, 1, score.n_problems)
    ours = {str(p): score.fast_p[key] for p, key in [(0.0, "fast_0"), (1.0, "fast_1"), (2.0, "fast_2")]}
    assert {p: theirs[p] for p in ours} == ours == {"0.0": 0.5, "1.0": 0.5, "2.0": 0.0}


def test_a_run_over_several_levels_keys_its_results_by_level(client, run, problem_set):
    level_2 = problem_set.problems.get(level=2)
    run.kernels.create(problem=level_2, source=KERNEL)
    files = unpack(client.get(f"/api/v1/runs/{run.pk}/export/").content)
    results = json.loads(next(text for name, text in files.items() if name.endswith("eval_results.json")))
    assert list(results) == ["level_1_problem_1", "level_1_problem_2"]  # the level-2 kernel has no result yet
    assert any(name.endswith("level_2_problem_1_sample_0_kernel.py") for name in files)


def test_the_api_serves_one_level_as_a_zip(client, run):
    response = client.get(f"/api/v1/runs/{run.pk}/export/?level=1", HTTP_ACCEPT="application/zip")
    assert response.status_code == 200 and response["Content-Type"] == "application/zip"
    assert f"run_{run.pk}_level_1.zip" in response["Content-Disposition"]
    assert client.get(f"/api/v1/runs/{run.pk}/export/?level=3").status_code == 404


@pytest.mark.parametrize(
    ("setting", "written"), [("one-shot", "one_shot"), ("few-shot", "few_shot"), ("agent", "agent")]
)
def test_the_setting_goes_out_as_kernelbench_names_its_prompt_option(imported_run, setting, written):
    # Issue 30: an import of prompt_option one_shot came back out as "one-shot".
    imported_run.setting = setting
    imported_run.save(update_fields=["setting"])
    config = yaml.safe_load(unpack(export_run(imported_run))["my-run/generation_config.yaml"])
    assert config["prompt_option"] == written


def test_a_cpu_runs_export_names_the_clock_that_timed_it_not_cuda_events(imported_run):
    assert imported_run.hardware.kind == "cpu"
    config = yaml.safe_load(unpack(export_run(imported_run))["my-run/generation_config.yaml"])
    assert config["scoring_rules"]["timing_method"] == "cpu_clock"
