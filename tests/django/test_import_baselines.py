import io

import pytest
from django.core.management import CommandError, call_command

from problems.models import Baseline, Hardware
from tests.django.conftest import write_json

pytestmark = pytest.mark.django_db

STATS = {
    "mean": 2.66,
    "std": 0.0199,
    "min": 2.65,
    "max": 2.86,
    "num_trials": 100,
    "hardware": "NVIDIA H100 80GB HBM3",
    "device": "cuda:0",
}


def run(*args) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    call_command("import_baselines", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def timing_file(tmp_path, name="baseline_time_torch.json", data=None):
    data = data or {
        "level1": {
            "1_Square_matrix_multiplication_.py": STATS,
            "2_Standard_matrix_multiplication_.py": {**STATS, "mean": 1.5},
        }
    }
    return write_json(tmp_path / name, data)


def test_it_imports_eager_timings_and_creates_the_hardware(imported_checkout, tmp_path):
    out, _ = run(str(timing_file(tmp_path)), "--hardware", "h100")
    baseline = Baseline.objects.get(problem__number=1)
    assert (baseline.mean_ms, baseline.std_ms, baseline.num_trials, baseline.mode) == (2.66, 0.0199, 100, "eager")
    assert Hardware.objects.get(slug="h100").device_name == "NVIDIA H100 80GB HBM3"
    assert "2 created" in out


def test_the_compile_variant_comes_from_the_file_name(imported_checkout, tmp_path):
    run(str(timing_file(tmp_path, "baseline_time_torch_compile_inductor_default.json")), "--hardware", "h100")
    assert set(Baseline.objects.values_list("mode", "compile_variant")) == {("compile", "inductor_default")}


def test_a_second_run_changes_nothing(imported_checkout, tmp_path):
    path = timing_file(tmp_path)
    run(str(path), "--hardware", "h100")
    out, _ = run(str(path), "--hardware", "h100")
    assert "0 created, 0 updated, 2 unchanged" in out


def test_unknown_problems_are_listed_not_dropped_silently(imported_checkout, tmp_path):
    data = {"level3": {"7_Unknown_model.py": STATS}, "level1": {"1_Square_matrix_multiplication_.py": STATS}}
    _, err = run(str(timing_file(tmp_path, data=data)), "--hardware", "h100")
    assert "unknown problem (not imported): level3/7_Unknown_model.py" in err
    assert Baseline.objects.count() == 1


def test_invalid_json_names_the_line_and_writes_nothing(imported_checkout, tmp_path):
    path = tmp_path / "baseline_time_torch.json"
    path.write_text('{"level1": {\n  "1_A.py": {"mean": 1,}\n}}')
    with pytest.raises(CommandError, match=r"baseline_time_torch\.json:2:\d+: not valid JSON"):
        run(str(path), "--hardware", "h100")
    assert not Baseline.objects.exists() and not Hardware.objects.exists()


def test_a_bad_value_names_the_key_and_writes_nothing(imported_checkout, tmp_path):
    data = {
        "level1": {
            "1_Square_matrix_multiplication_.py": STATS,
            "2_Standard_matrix_multiplication_.py": {**STATS, "mean": "fast"},
        }
    }
    with pytest.raises(CommandError, match=r"key level1/2_Standard_matrix_multiplication_\.py/mean: expected a number"):
        run(str(timing_file(tmp_path, data=data)), "--hardware", "h100")
    assert not Baseline.objects.exists()


def test_a_missing_mean_names_the_key(imported_checkout, tmp_path):
    data = {"level1": {"1_Square_matrix_multiplication_.py": {"std": 1.0}}}
    with pytest.raises(CommandError, match=r"1_Square_matrix_multiplication_\.py/mean: missing"):
        run(str(timing_file(tmp_path, data=data)), "--hardware", "h100")


def test_a_bad_level_key_is_an_error(imported_checkout, tmp_path):
    with pytest.raises(CommandError, match="key 'level9'"):
        run(str(timing_file(tmp_path, data={"level9": {}})), "--hardware", "h100")


def test_an_unknown_problem_set_is_an_error(imported_checkout, tmp_path):
    with pytest.raises(CommandError, match="no problem set 'Nope' .the sets: kernelbench-v01 .KernelBench v0.1.."):
        run(str(timing_file(tmp_path)), "--hardware", "h100", "--set", "Nope")
