import pytest

from leaderboard.evaluations.queue import enqueue_evaluation
from leaderboard.models import Evaluation, Kernel, Run
from problems.models import Hardware

from .conftest import KERNEL

URL = "/api/v1/submissions/"


@pytest.fixture
def problem(problem_set):
    return problem_set.problems.get(level=1, number=1)


def test_an_ingestor_submits_a_kernel_and_gets_a_url_to_poll(
    token_client, ingestor, problem, hardware, model, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks() as callbacks:
        response = token_client(ingestor).post(
            URL, {"problem": problem.pk, "source": KERNEL, "hardware": "cpu", "model": "model-a"}, format="json"
        )
    assert response.status_code == 202, response.content
    body = response.json()
    evaluation = Evaluation.objects.get(pk=body["id"])
    assert body["status"] == "queued" and body["url"].endswith(f"/api/v1/evaluations/{evaluation.pk}/")
    assert response["Location"] == body["url"]
    assert evaluation.kernel.submitted_by == ingestor and evaluation.hardware == hardware
    assert evaluation.kernel.run.name == "submissions" and evaluation.kernel.run.origin == "measured"
    # the job is enqueued once the transaction commits (beside it: the boards' re-scoring of the run)
    jobs = [cb for cb in callbacks if getattr(cb, "func", None) is enqueue_evaluation]
    assert [job.args for job in jobs] == [(evaluation.pk,)]
    assert token_client(None).get(body["url"]).json()["state"] == "queued"


def test_a_second_submission_is_the_next_sample_of_the_same_run(token_client, ingestor, problem, hardware, model):
    client = token_client(ingestor)
    data = {"problem": problem.pk, "source": KERNEL, "hardware": "cpu", "model": "model-a"}
    first, second = (client.post(URL, data, format="json").json() for _ in range(2))
    assert first["run"] == second["run"]
    assert sorted(Kernel.objects.values_list("sample_index", flat=True)) == [0, 1]


def test_submitting_into_a_measured_run_uses_its_hardware(token_client, ingestor, problem, run):
    Run.objects.filter(pk=run.pk).update(created_by=ingestor)
    response = token_client(ingestor).post(URL, {"problem": problem.pk, "source": KERNEL, "run": run.pk}, format="json")
    assert response.status_code == 202 and response.json()["run"] == run.pk
    assert Kernel.objects.get(pk=response.json()["kernel"]).sample_index == 1


def test_only_the_runs_creator_or_an_admin_adds_kernels_to_it(token_client, ingestor, admin_user, problem, run):
    """Issue 19, case 6: an Ingestor added a kernel to an admin's measured run."""
    data = {"problem": problem.pk, "source": KERNEL, "run": run.pk}
    kernels = Kernel.objects.count()
    response = token_client(ingestor).post(URL, data, format="json")
    assert response.status_code == 400 and "is not yours" in response.json()["run"][0]
    assert Kernel.objects.count() == kernels and not Evaluation.objects.filter(state="queued").exists()
    assert token_client(admin_user).post(URL, data, format="json").status_code == 202


def test_a_kernel_of_a_run_is_not_evaluated_on_other_hardware(token_client, ingestor, problem, run):
    """Issue 19, case 6: a kernel evaluated on the CPU became sample 0 of an H200 run."""
    Run.objects.filter(pk=run.pk).update(created_by=ingestor)
    Hardware.objects.create(slug="h200", name="H200", kind=Hardware.Kind.GPU)
    data = {"problem": problem.pk, "source": KERNEL, "run": run.pk, "hardware": "h200"}
    kernels = Kernel.objects.count()
    response = token_client(ingestor).post(URL, data, format="json")
    assert response.status_code == 400 and "evaluated there, not on h200" in response.json()["hardware"][0]
    assert Kernel.objects.count() == kernels


@pytest.mark.parametrize(
    ("change", "field", "message"),
    [
        ({"problem": 99999}, "problem", "no problem 99999"),
        ({"hardware": "h999"}, "hardware", "no hardware 'h999'; the hardware: cpu"),
        ({"model": "nobody"}, "model", "does not exist"),
        ({"source": "print('hi')"}, "source", "class ModelNew"),
        ({"source": KERNEL + "\x00"}, "source", "Null characters"),
        ({"source": ""}, "source", "blank"),
        ({"model": None, "hardware": "cpu"}, "non_field_errors", "exactly one of model or run"),
    ],
)
def test_bad_submissions_are_400_and_write_nothing(
    token_client, ingestor, problem, hardware, model, change, field, message
):
    data = {"problem": problem.pk, "source": KERNEL, "hardware": "cpu", "model": "model-a", **change}
    data = {key: value for key, value in data.items() if value is not None}
    response = token_client(ingestor).post(URL, data, format="json")
    assert response.status_code == 400, response.content
    assert message in str(response.json()[field])
    assert Kernel.objects.count() == 0 and Run.objects.count() == 0


def test_an_imported_run_is_refused(token_client, ingestor, problem, run):
    Run.objects.filter(pk=run.pk).update(origin="imported")
    response = token_client(ingestor).post(URL, {"problem": problem.pk, "source": KERNEL, "run": run.pk}, format="json")
    assert response.status_code == 400 and "imported" in response.json()["run"][0]


def test_a_source_over_the_cap_is_refused(token_client, ingestor, problem, hardware, model, settings):
    settings.KERNEL_SOURCE_MAX_BYTES = 200
    data = {"problem": problem.pk, "source": KERNEL + "#" * 300, "hardware": "cpu", "model": "model-a"}
    response = token_client(ingestor).post(URL, data, format="json")
    assert response.status_code == 400 and "limit is 200 bytes" in response.json()["source"][0]
    big = {**data, "source": KERNEL + "#" * 70_000}  # past the body cap (2 x source cap + 64 kB)
    assert token_client(ingestor).post(URL, big, format="json").status_code == 413
    assert Kernel.objects.count() == 0


def test_permissions(token_client, client, visitor, reviewer, problem, hardware, model):
    data = {"problem": problem.pk, "source": KERNEL, "hardware": "cpu", "model": "model-a"}
    assert client.post(URL, data, content_type="application/json").status_code in (401, 403)
    assert token_client(visitor).post(URL, data, format="json").status_code == 403
    assert token_client(reviewer).post(URL, data, format="json").status_code == 403
    assert Kernel.objects.count() == 0


def test_wrong_content_type_is_415(token_client, ingestor, db):
    assert token_client(ingestor).generic("POST", URL, "x", content_type="text/plain").status_code == 415
