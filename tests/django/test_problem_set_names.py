"""Problem sets resolve by slug or name, case-insensitively, in every command, API route and page,
as hardware does; a run folder whose problems only one set holds goes to that set (issue 21.1)."""

import io
import zipfile

import pytest
from django.contrib.auth.models import Permission, User
from django.core.management import CommandError, call_command
from rest_framework.authtoken.models import Token

from leaderboard.models import Run
from problems.models import Hardware, ProblemSet
from tests.django.test_import_baselines import timing_file
from tests.pagekit import make_set, plain_static  # noqa: F401

pytestmark = pytest.mark.django_db
KERNEL = "import torch\nclass ModelNew(torch.nn.Module):\n    pass\n"


def quiet(*args) -> str:
    out = io.StringIO()
    call_command(*args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


def run_zip(tmp_path, *problems: int):
    path = tmp_path / "run.zip"
    with zipfile.ZipFile(path, "w") as archive:
        for number in problems:
            archive.writestr(f"level_1_problem_{number}_sample_0_kernel.py", KERNEL)
    return path


@pytest.fixture
def two_sets(imported_checkout):
    """KernelBench v0.1 (level 1: problems 1 and 2, level 2: 1) beside the demo's Starter v1 (level 1: 1)."""
    Hardware.objects.create(slug="h100_modal", name="NVIDIA H100 80GB HBM3")
    make_set("Starter v1", levels=(1,))
    return ProblemSet.objects.get(name="KernelBench v0.1")


def test_resolve_takes_the_slug_or_the_name_in_any_case():
    kernelbench = ProblemSet.objects.create(slug="kernelbench-v01", name="KernelBench v0.1")
    assert ProblemSet.objects.resolve("kernelbench-v01") == kernelbench
    assert ProblemSet.objects.resolve("KernelBench v0.1") == kernelbench
    assert ProblemSet.objects.resolve("kernelbench V0.1") == kernelbench
    assert ProblemSet.objects.resolve("KERNELBENCH-V01") == kernelbench
    assert ProblemSet.objects.resolve("Starter v1") is None and ProblemSet.objects.resolve("") is None


def test_import_run_takes_the_name_import_problems_printed(two_sets, tmp_path):
    path = run_zip(tmp_path, 1)
    quiet("import_run", str(path), "--model", "M", "--hardware", "H100_Modal", "--set", "KernelBench v0.1")
    assert Run.objects.get().problem_set == two_sets


def test_import_run_defaults_to_the_only_set_holding_the_problems(two_sets, tmp_path):
    quiet("import_run", str(run_zip(tmp_path, 1, 2)), "--model", "M", "--hardware", "H100_Modal")
    assert Run.objects.get().problem_set == two_sets  # Starter v1 has no level 1 problem 2


def test_import_run_lists_the_candidate_sets_with_their_slugs(two_sets, tmp_path):
    with pytest.raises(CommandError, match=r"kernelbench-v01 \(KernelBench v0.1\), starter-v1 \(Starter v1\)"):
        quiet("import_run", str(run_zip(tmp_path, 1)), "--model", "M", "--hardware", "H100_Modal")
    with pytest.raises(CommandError, match=r"no problem set 'Nope'; the sets: kernelbench-v01"):
        quiet("import_run", str(run_zip(tmp_path, 1)), "--model", "M", "--hardware", "h100_modal", "--set", "Nope")
    assert not Run.objects.exists()


def test_import_problems_prints_the_slug_and_finds_the_set_by_it(imported_checkout):
    out = quiet("import_problems", str(imported_checkout), "--set", "kernelbench-v01")
    assert "slug kernelbench-v01" in out
    assert list(ProblemSet.objects.values_list("name", flat=True)) == ["KernelBench v0.1"]


def test_import_baselines_takes_the_slug(imported_checkout, tmp_path):
    quiet("import_baselines", str(timing_file(tmp_path)), "--hardware", "h100", "--set", "KERNELBENCH-V01")
    assert ProblemSet.objects.get().problems.filter(baselines__isnull=False).exists()


def ingestor_token() -> str:
    user = User.objects.create_user("ingestor")
    user.user_permissions.add(*Permission.objects.filter(codename__in=["add_run", "add_kernel", "add_evaluation"]))
    return Token.objects.create(user=user).key


def post_run(client, path, **fields):
    with path.open("rb") as upload:
        return client.post(
            "/api/v1/runs/import/", {"file": upload, "model": "M", "hardware": "h100_modal", **fields},
            HTTP_AUTHORIZATION=f"Token {ingestor_token()}",
        )  # fmt: skip


def test_the_api_takes_the_name_and_lists_candidates(client, two_sets, tmp_path):
    ambiguous = post_run(client, run_zip(tmp_path, 1))
    assert ambiguous.status_code == 400
    assert "kernelbench-v01 (KernelBench v0.1), starter-v1 (Starter v1)" in ambiguous.json()["errors"][0]
    User.objects.all().delete()
    named = post_run(client, run_zip(tmp_path, 1), problem_set="kernelbench v0.1")
    assert named.status_code == 201, named.content
    assert named.json()["run"]["problem_set"] == "kernelbench-v01"
    listed = client.get("/api/v1/runs/?set=KernelBench%20v0.1").json()["results"]
    assert [run["id"] for run in listed] == [Run.objects.get().pk]
    assert client.get("/api/v1/problems/?set=Starter%20V1").json()["count"] == 1
    assert client.get("/api/v1/leaderboard/?set=KernelBench%20v0.1").json()["problem_set"] == "kernelbench-v01"


def test_the_level_page_takes_the_name(client, two_sets):
    response = client.get("/levels/1/?set=Starter%20v1")
    assert response.context["problem_set"].slug == "starter-v1"
    assert client.get("/problems/?set=STARTER%20V1").context["problem_set"].slug == "starter-v1"


def test_the_detail_routes_take_the_slug_or_the_name(client, two_sets):
    assert client.get("/api/v1/problem-sets/KernelBench%20v0.1/").json()["slug"] == "kernelbench-v01"
    assert client.get("/api/v1/problem-sets/kernelbench-v01/").json()["name"] == "KernelBench v0.1"
    assert client.get("/api/v1/hardware/nvidia%20h100%2080gb%20hbm3/").json()["slug"] == "h100_modal"
    assert client.get("/api/v1/problem-sets/nope/").status_code == 404
