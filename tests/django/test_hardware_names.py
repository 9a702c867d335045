"""Hardware names resolve the same way in every command and API route: slug or display name,
case-insensitively, or the slug the name becomes (issue 14.5)."""

import io
import json
import zipfile

import pytest
from django.contrib.auth.models import Permission, User
from django.core.management import CommandError, call_command
from rest_framework.authtoken.models import Token

from leaderboard.models import Run
from problems.models import Hardware
from tests.django.test_import_baselines import timing_file

pytestmark = pytest.mark.django_db
KERNEL = "import torch\nclass ModelNew(torch.nn.Module):\n    pass\n"


def quiet(*args):
    call_command(*args, stdout=io.StringIO(), stderr=io.StringIO())


def run_zip() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("level_1_problem_1_sample_0_kernel.py", KERNEL)
    return buffer.getvalue()


def test_resolve_takes_the_slug_the_name_or_the_slug_a_name_becomes():
    h200 = Hardware.objects.create(slug="h200", name="NVIDIA H200")
    modal = Hardware.objects.create(slug="h100_modal", name="NVIDIA H100 80GB HBM3")
    assert Hardware.objects.resolve("H200") == h200
    assert Hardware.objects.resolve("nvidia h200") == h200
    assert Hardware.objects.resolve("H100_Modal") == modal
    assert Hardware.objects.resolve("nvidia h100 80gb hbm3") == modal
    assert Hardware.objects.resolve("a100") is None and Hardware.objects.resolve("") is None


def test_import_baselines_then_import_run_with_the_same_name(imported_checkout, tmp_path):
    quiet("import_baselines", str(timing_file(tmp_path)), "--hardware", "H100_Modal")
    assert list(Hardware.objects.values_list("slug", flat=True)) == ["h100_modal"]
    quiet("import_baselines", str(timing_file(tmp_path)), "--hardware", "h100_modal")  # found again, not a second one
    path = tmp_path / "run.zip"
    path.write_bytes(run_zip())
    quiet("import_run", str(path), "--model", "M", "--hardware", "H100_Modal")
    assert Run.objects.get().hardware.slug == "h100_modal"
    with pytest.raises(CommandError, match="no hardware 'A100'"):
        quiet("import_run", str(path), "--model", "M", "--hardware", "A100")


def test_the_api_takes_a_name_too(client, imported_checkout):
    Hardware.objects.create(slug="h100_modal", name="NVIDIA H100 80GB HBM3")
    user = User.objects.create_user("ingestor")
    user.user_permissions.add(*Permission.objects.filter(codename__in=["add_run", "add_kernel", "add_evaluation"]))
    token = Token.objects.create(user=user)
    upload = io.BytesIO(run_zip())
    upload.name = "run.zip"
    response = client.post(
        "/api/v1/runs/import/", {"file": upload, "model": "M", "hardware": "H100_Modal"},
        HTTP_AUTHORIZATION=f"Token {token.key}",
    )  # fmt: skip
    assert response.status_code == 201, response.content
    assert response.json()["run"]["hardware"] == "h100_modal"
    board = client.get("/api/v1/runs/?hardware=NVIDIA%20H100%2080GB%20HBM3")
    assert [run["id"] for run in json.loads(board.content)["results"]] == [Run.objects.get().pk]
