"""A run folder's generation_config.yaml (as KernelBench's generate_samples.py saves it) gives the
import its defaults: model, level, prompt option, samples, precision, name; flags override them."""

import io
import zipfile
from pathlib import Path

import pytest
from django.contrib.auth.models import Permission, User
from django.core.management import CommandError, call_command
from rest_framework.authtoken.models import Token

from leaderboard.ingest import generation_config
from leaderboard.ingest.uploads import RowErrors
from leaderboard.models import Run
from problems.models import Hardware

pytestmark = pytest.mark.django_db
# Written by KernelBench's scripts/generate_samples.py (pydra's save_yaml of GenerationConfig).
SAVED = (Path(__file__).parent / "data" / "generation_config.yaml").read_text()
KERNEL = "import torch\nclass ModelNew(torch.nn.Module):\n    pass\n"


def run_folder(tmp_path: Path, config: str | None = SAVED) -> Path:
    folder = tmp_path / "kb_run"
    folder.mkdir()
    (folder / "level_1_problem_1_sample_0_kernel.py").write_text(KERNEL)
    (folder / "level_1_problem_2_sample_0_kernel.py").write_text(KERNEL)
    (folder / "eval_results.json").write_text('{"1": [{"sample_id": 0, "compiled": true, "correctness": false}]}')
    if config is not None:
        (folder / "generation_config.yaml").write_text(config)
    return folder


def import_run(*args) -> str:
    out = io.StringIO()
    call_command("import_run", *args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


def test_it_reads_what_generate_samples_saves():
    assert generation_config.parse(SAVED) == {
        "model": "gpt-4o", "level": 1, "setting": "one-shot", "samples": 1, "precision": "fp32", "name": "my_run",
    }  # fmt: skip


def test_bad_values_are_named():
    with pytest.raises(RowErrors, match="level must be a whole number"):
        generation_config.parse("level: five\n")
    with pytest.raises(RowErrors, match="precision must be one of"):
        generation_config.parse("precision: fp8\n")
    with pytest.raises(RowErrors, match="not valid YAML"):
        generation_config.parse("model_name: [\n")


def test_an_import_with_no_model_flag_takes_the_files(imported_checkout, tmp_path):
    Hardware.objects.create(slug="h100", name="H100")
    config = SAVED.replace("num_samples: 1", "num_samples: 3").replace("precision: fp32", "precision: bf16")
    out = import_run(str(run_folder(tmp_path, config)), "--hardware", "h100")
    run = Run.objects.select_related("model").get()
    assert (run.model.name, run.setting, run.name, run.precision, run.samples_per_problem) == (
        "gpt-4o", "one-shot", "my_run", "bf16", 3,
    )  # fmt: skip
    assert "generation_config.yaml: model gpt-4o" in out


def test_flags_override_the_file(imported_checkout, tmp_path):
    Hardware.objects.create(slug="h100", name="H100")
    folder = run_folder(tmp_path)
    import_run(str(folder), "--hardware", "h100", "--model", "Other", "--setting", "agent", "--precision", "fp16")
    run = Run.objects.select_related("model").get()
    assert (run.model.name, run.setting, run.precision) == ("Other", "agent", "fp16")


def test_without_the_file_the_model_is_needed(imported_checkout, tmp_path):
    Hardware.objects.create(slug="h100", name="H100")
    with pytest.raises(CommandError, match="give --model"):
        import_run(str(run_folder(tmp_path, config=None)), "--hardware", "h100")


def upload(config: str, name: str) -> io.BytesIO:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("r/level_1_problem_1_sample_0_kernel.py", KERNEL)
        archive.writestr("r/generation_config.yaml", config)
    buffer.seek(0)
    buffer.name = name
    return buffer


def test_the_api_takes_the_files_defaults_too(client, imported_checkout):
    Hardware.objects.create(slug="h200", name="NVIDIA H200")
    user = User.objects.create_user("ingestor")
    user.user_permissions.add(*Permission.objects.filter(codename__in=["add_run", "add_kernel", "add_evaluation"]))
    auth = {"HTTP_AUTHORIZATION": f"Token {Token.objects.create(user=user).key}"}
    sent = upload(SAVED.replace("precision: fp32", "precision: fp16"), "upload.zip")
    response = client.post("/api/v1/runs/import/", {"file": sent, "hardware": "h200"}, **auth)
    assert response.status_code == 201, response.content
    run = response.json()["run"]
    assert (run["model"], run["name"], run["precision"], run["setting"]) == ("gpt-4o", "my_run", "fp16", "one-shot")
    bare = upload(SAVED.replace("model_name: gpt-4o", "model_name: None"), "bare.zip")
    refused = client.post("/api/v1/runs/import/", {"file": bare, "hardware": "h200"}, **auth)
    assert refused.status_code == 400 and "model" in refused.json()
