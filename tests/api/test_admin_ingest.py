"""Admin: CSV upload of reported scores and launch posts, and re-evaluating every kernel of a run."""

from django.core.files.uploadedfile import SimpleUploadedFile

from leaderboard.models import Evaluation, LaunchPost, ReportedScore
from problems.models import ScoringRules

SCORES = (
    "model,organization,variant,metric,value,unit,setting,hardware,date,source_url\n"
    "GPT-4o,OpenAI,KernelBench v0 L1,fast_1,4,%,one-shot,NVIDIA L40S,2025-02-14,https://arxiv.org/html/2502.10517v1\n"
)
POSTS = (
    "date,lab,model,title,url,lists_kernelbench,kernelbench_score\n2025-06-01,Lab A,,Launch,https://a.example/x,no,\n"
)
SCORES_URL = "/admin/leaderboard/reportedscore/upload-csv/"


def test_an_admin_uploads_reported_scores(admin_client):
    assert "Upload CSV" in admin_client.get("/admin/leaderboard/reportedscore/").content.decode()
    assert admin_client.get(SCORES_URL).status_code == 200
    response = admin_client.post(SCORES_URL, {"file": SimpleUploadedFile("s.csv", SCORES.encode())}, follow=True)
    assert "1 created" in response.content.decode()
    assert ReportedScore.objects.count() == 1


def test_bad_rows_are_listed_and_nothing_is_written(admin_client):
    bad = SCORES + SCORES.splitlines()[1].replace(",4,", ",400,").replace("L1", "L2") + "\n"
    response = admin_client.post(SCORES_URL, {"file": SimpleUploadedFile("s.csv", bad.encode())})
    assert response.status_code == 400 and "line 3: value 400% is outside 0-100" in response.content.decode()
    assert ReportedScore.objects.count() == 0


def test_non_utf8_uploads_are_refused(admin_client):
    response = admin_client.post(SCORES_URL, {"file": SimpleUploadedFile("s.csv", b"\xff\xfe\x00")})
    assert response.status_code == 400 and "not UTF-8" in response.content.decode()


def test_an_ingestor_uploads_launch_posts(client, ingestor):
    ingestor.is_staff = True
    ingestor.save()
    client.force_login(ingestor)
    url = "/admin/leaderboard/launchpost/upload-csv/"
    response = client.post(url, {"file": SimpleUploadedFile("p.csv", POSTS.encode())})
    assert response.status_code == 302 and LaunchPost.objects.count() == 1


def test_staff_without_the_add_permission_cannot_upload(client, reviewer):
    reviewer.is_staff = True
    reviewer.save()
    client.force_login(reviewer)
    assert client.get(SCORES_URL).status_code == 403


def test_the_run_action_queues_every_kernel_on_the_runs_hardware(admin_client, run):
    response = admin_client.post(
        "/admin/leaderboard/run/", {"action": "verify_runs", "_selected_action": [run.pk]}, follow=True
    )
    assert "Queued 2 evaluations" in response.content.decode()
    assert Evaluation.objects.filter(state="queued", hardware=run.hardware).count() == 2


def test_the_rescore_action_asks_for_rules_then_queues_under_them(admin_client, run):
    asked = admin_client.post("/admin/leaderboard/run/", {"action": "rescore_runs", "_selected_action": [run.pk]})
    assert asked.status_code == 200 and "Re-score runs under other rules" in asked.content.decode()
    rules = ScoringRules.objects.for_version("v0.1")
    done = admin_client.post(
        "/admin/leaderboard/run/",
        {"action": "rescore_runs", "_selected_action": [run.pk], "rules": rules.pk},
        follow=True,
    )
    assert "Runs now scored under KernelBench v0.1" in done.content.decode()
    run.refresh_from_db()
    assert run.rules == rules
    assert Evaluation.objects.filter(state="queued", rules=rules).count() == 2
