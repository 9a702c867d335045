"""Every write a person makes through the API, the pages or the admin is recorded with its user
(WriteRecord, by the service that made it), and commands run without a user say which command."""

from __future__ import annotations

import pytest
from django.contrib import admin
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.test import RequestFactory
from django.urls import URLResolver, get_resolver, reverse

from leaderboard.admin import RecordedAdmin
from leaderboard.models import Evaluation, Kernel, Lab, LanguageModel, Origin, Run, WriteRecord
from problems.models import Hardware, Problem, ProblemSet, ScoringRules

KERNEL = "import torch\nimport torch.nn as nn\n\nclass ModelNew(nn.Module):\n    def forward(self, a, b):\n        return a @ b\n"
SCORE = {
    "model": "GPT-4o", "organization": "OpenAI", "variant": "KernelBench v0 L1", "metric": "fast_1", "value": 4,
    "unit": "%", "setting": "one-shot", "hardware": "NVIDIA L40S", "date": "2025-02-14",
    "source_url": "https://arxiv.org/html/2502.10517v1",
}  # fmt: skip
POST = {"date": "2025-06-01", "lab": "Lab A", "model": "", "title": "Launch", "url": "https://a.example/x"}
SCORES_CSV = ",".join(SCORE) + "\n" + ",".join(str(value) for value in SCORE.values()) + "\n"
POSTS_CSV = (
    "date,lab,model,title,url,lists_kernelbench,kernelbench_score\n2025-06-01,Lab A,,Launch,https://a.example/x,no,\n"
)


@pytest.fixture
def world(db, ingestor):
    problem_set = ProblemSet.objects.create(slug="kb", name="KernelBench test")
    problem = Problem.objects.create(problem_set=problem_set, level=1, number=1, name="Square_matmul", source="x")
    hardware = Hardware.objects.create(slug="cpu", name="CPU", kind=Hardware.Kind.CPU)
    model = LanguageModel.objects.create(name="Model A", lab=Lab.objects.create(name="Lab A"))
    run = Run.objects.create(model=model, problem_set=problem_set, hardware=hardware, created_by=ingestor)
    kernel = Kernel.objects.create(run=run, problem=problem, source=KERNEL)
    evaluation = Evaluation.objects.create(
        kernel=kernel, hardware=hardware, origin=Origin.MEASURED, state=Evaluation.State.DONE, speedup=2.0
    )
    kernel.latest_evaluation = evaluation
    kernel.save()
    return {"problem": problem, "run": run, "kernel": kernel, "model": model}


def recorded(user, action: str) -> bool:
    return WriteRecord.objects.filter(user=user, by_name=user.get_username(), action=action).exists()


# --- the API ---------------------------------------------------------------------------------


def test_the_apis_writes_are_recorded_with_their_user(world, token_client, ingestor, reviewer, visitor):
    kernel, run = world["kernel"], world["run"]
    as_ingestor = token_client(ingestor)
    assert as_ingestor.post("/api/v1/reported-scores/", SCORE, format="json").status_code == 201
    assert as_ingestor.post("/api/v1/launch-posts/", POST, format="json").status_code == 201
    submission = {"problem": world["problem"].pk, "source": KERNEL, "hardware": "cpu", "model": "model-a"}
    assert as_ingestor.post("/api/v1/submissions/", submission, format="json").status_code == 202
    files = {"level_1_problem_1_sample_0_kernel.py": KERNEL}
    imported = {"model": "Model B", "hardware": "cpu", "problem_set": "kb", "name": "r", "kernels": files}
    assert as_ingestor.post("/api/v1/runs/import/", imported, format="json").status_code == 201
    assert as_ingestor.post(f"/api/v1/runs/{run.pk}/verify/").status_code == 202
    as_reviewer = token_client(reviewer)
    verdict = {"verdict": "clean", "note": "checked"}
    assert as_reviewer.post(f"/api/v1/kernels/{kernel.pk}/reviews/", verdict, format="json").status_code == 201
    assert as_reviewer.post("/api/v1/reviews/", {**verdict, "kernel": kernel.pk}, format="json").status_code == 201
    report = {"reason": "too fast"}
    assert token_client(visitor).post(f"/api/v1/kernels/{kernel.pk}/reports/", report, format="json").status_code == 201
    for action in ("store_reported_scores", "store_launch_posts", "submit_kernel", "store_run", "verify_run"):
        assert recorded(ingestor, action), action
    assert WriteRecord.objects.filter(user=reviewer, action="record_verdict").count() == 2
    assert recorded(visitor, "report_kernel")
    assert WriteRecord.objects.filter(user=None).count() == 0  # every one of them names its user


def _write_views(patterns) -> set[tuple[str, str]]:
    """(view class, method) of every API route that accepts a write."""
    found = set()
    for pattern in patterns:
        if isinstance(pattern, URLResolver):
            found |= _write_views(pattern.url_patterns)
            continue
        view = getattr(pattern.callback, "cls", None)
        if view is None:
            continue
        actions = getattr(pattern.callback, "actions", None)
        methods = (
            set(actions) if actions is not None else {m for m in ("post", "put", "patch", "delete") if hasattr(view, m)}
        )
        found |= {(view.__name__, method.upper()) for method in methods - {"get", "head", "options"}}
    return found


def test_every_write_route_of_the_api_is_checked_above():
    # A new write route: add it to the test above (and have its service record the write).
    api = next(p for p in get_resolver().url_patterns if isinstance(p, URLResolver) and "api" in str(p.pattern))
    assert _write_views(api.url_patterns) == {
        ("ReportedScoreViewSet", "POST"), ("LaunchPostViewSet", "POST"), ("SubmissionView", "POST"),
        ("RunViewSet", "POST"), ("KernelReviewsView", "POST"), ("ReviewViewSet", "POST"), ("KernelReportsView", "POST"),
    }  # fmt: skip


# --- the pages -------------------------------------------------------------------------------


def test_the_pages_writes_are_recorded_with_their_user(world, client, ingestor, reviewer, visitor):
    kernel = world["kernel"]
    client.force_login(reviewer)
    client.post(reverse("kernel-review", args=[kernel.pk]), {"verdict": "reward_hack", "note": "no-op"})
    client.force_login(visitor)
    client.post(reverse("kernel-report", args=[kernel.pk]), {"reason": "too fast"})
    client.force_login(ingestor)
    submit = reverse("problem-submit", args=[world["problem"].pk])
    assert client.post(submit, {"source": KERNEL, "hardware": "cpu", "model": "model-a"}).status_code == 302
    assert recorded(reviewer, "record_verdict") and recorded(visitor, "report_kernel")
    assert recorded(ingestor, "submit_kernel")


# --- the admin -------------------------------------------------------------------------------


def test_the_admins_pages_and_actions_are_recorded_with_their_user(world, client, admin_user):
    client.force_login(admin_user)
    for url, csv in (("reportedscore", SCORES_CSV), ("launchpost", POSTS_CSV)):
        upload = SimpleUploadedFile("rows.csv", csv.encode())
        assert client.post(f"/admin/leaderboard/{url}/upload-csv/", {"file": upload}).status_code == 302
    runs = {"action": "verify_runs", "_selected_action": [world["run"].pk]}
    client.post("/admin/leaderboard/run/", runs)
    rules = ScoringRules.objects.for_version("v0.1")
    client.post("/admin/leaderboard/run/", {**runs, "action": "rescore_runs", "rules": rules.pk})
    other = LanguageModel.objects.create(name="Model Z")
    merge = {"action": "merge_selected_models", "_selected_action": [world["model"].pk, other.pk]}
    client.post("/admin/leaderboard/languagemodel/", {**merge, "keep": world["model"].pk})
    verdict = {"kernel": world["kernel"].pk, "verdict": "clean", "note": ""}
    assert client.post("/admin/leaderboard/review/add/", verdict).status_code == 302
    actions = ("store_reported_scores", "store_launch_posts", "verify_run", "rescore_run", "merge_models")
    for action in (*actions, "record_verdict"):
        assert recorded(admin_user, action), action


def test_the_admins_edit_forms_are_recorded_with_their_user(db, client, admin_user):
    client.force_login(admin_user)
    assert client.post("/admin/leaderboard/lab/add/", {"name": "Lab Q", "slug": "lab-q"}).status_code == 302
    lab = Lab.objects.get(name="Lab Q")
    change = {"name": "Lab R", "slug": "lab-q", "website": ""}
    assert client.post(f"/admin/leaderboard/lab/{lab.pk}/change/", change).status_code == 302
    assert client.post(f"/admin/leaderboard/lab/{lab.pk}/delete/", {"post": "yes"}).status_code == 302
    history = WriteRecord.objects.of(lab).filter(user=admin_user)
    assert sorted(history.values_list("action", flat=True)) == ["admin_add", "admin_change", "admin_delete"]
    # problems' admins too (registered again above them, in leaderboard/admin.py)
    assert client.post("/admin/problems/hardware/add/", {"slug": "h1", "name": "H1", "kind": "gpu"}).status_code == 302
    assert WriteRecord.objects.filter(user=admin_user, action="admin_add", target_type="problems.hardware").exists()


def test_every_admin_that_edits_records_its_edits(admin_user):
    # An admin whose forms write rows must record them (RecordedAdmin); Review's one form calls
    # record_verdict, which records its own.
    request = RequestFactory().get("/")
    request.user = admin_user
    unrecorded = [
        model.__name__
        for model, model_admin in admin.site._registry.items()
        if model._meta.app_label in ("leaderboard", "problems")
        and not isinstance(model_admin, RecordedAdmin)
        and model.__name__ != "Review"
        and any(
            check(request)
            for check in (
                model_admin.has_add_permission,
                model_admin.has_change_permission,
                model_admin.has_delete_permission,
            )
        )
    ]
    assert unrecorded == []


# --- commands --------------------------------------------------------------------------------


def test_a_command_run_without_a_user_records_its_own_name(world, tmp_path):
    path = tmp_path / "posts.csv"
    path.write_text(POSTS_CSV, encoding="utf-8")
    call_command("import_launch_posts", str(path), stdout=open("/dev/null", "w"))
    record = WriteRecord.objects.get(action="store_launch_posts")
    assert (record.user, record.by_name) == (None, "manage.py import_launch_posts")


def test_a_write_that_names_nobody_is_refused(db):
    with pytest.raises(ValueError):
        WriteRecord.objects.note("", "store_run")
