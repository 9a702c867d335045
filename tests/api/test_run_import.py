import io
import json
import zipfile

import pytest

from leaderboard.models import Evaluation, Kernel, Run

from .conftest import KERNEL

URL = "/api/v1/runs/import/"
RESULTS = {
    "1": [
        {
            "sample_id": 0,
            "compiled": True,
            "correctness": True,
            "metadata": {"hardware": "cpu"},
            "runtime": 1.0,
            "runtime_stats": {"mean": 1.0, "std": 0.1, "min": 0.9, "max": 1.2, "num_trials": 100},
        }
    ],
    "2": [
        {
            "sample_id": 0,
            "compiled": False,
            "correctness": False,
            "metadata": {"compilation_error": "x"},
            "runtime": -1.0,
        }
    ],
}
FILES = {"level_1_problem_1_sample_0_kernel.py": KERNEL, "level_1_problem_2_sample_0_kernel.py": KERNEL}
FIELDS = {"model": "Model B", "hardware": "cpu", "problem_set": "kb", "setting": "one-shot", "name": "run-1"}


def make_zip(files: dict[str, bytes | str], name: str = "run.zip", compression=zipfile.ZIP_DEFLATED) -> io.BytesIO:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression) as archive:
        for path, data in files.items():
            archive.writestr(path, data)
    buffer.seek(0)
    buffer.name = name
    return buffer


def run_zip(results=RESULTS, files=FILES) -> io.BytesIO:
    contents = {f"run-1/{name}": source for name, source in files.items()}
    if results is not None:
        contents["run-1/eval_results.json"] = json.dumps(results)
    return make_zip(contents)


def upload(client, archive, **fields):
    return client.post(URL, {**FIELDS, **fields, "file": archive}, format="multipart")


def test_an_ingestor_imports_a_zipped_run_folder(token_client, ingestor, baseline):
    response = upload(token_client(ingestor), run_zip())
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["kernels"]["created"] == 2 and body["evaluations"]["created"] == 2
    run = Run.objects.get(pk=body["run"]["id"])
    assert run.origin == "imported" and run.model.name == "Model B" and run.created_by == ingestor
    correct = Evaluation.objects.get(kernel__problem__number=1)
    assert correct.origin == "imported" and correct.state == "done" and correct.status == "correct"
    assert correct.kernel_ms == 1.0 and correct.speedup == 2.0 and correct.reference_ms == 2.0
    assert correct.kernel_timing["num_trials"] == 100
    assert correct.kernel.latest_evaluation == correct
    failed = Evaluation.objects.get(kernel__problem__number=2)
    assert failed.status == "compile_error" and failed.speedup is None and failed.kernel_ms is None


def test_without_a_baseline_the_speedup_is_unknown_and_it_says_so(token_client, ingestor, problem_set, hardware):
    body = upload(token_client(ingestor), run_zip()).json()
    correct = Evaluation.objects.get(kernel__problem__number=1)
    assert correct.correct is True and correct.speedup is None and correct.kernel_ms == 1.0
    assert "no speedup" in " ".join(body["warnings"])
    assert "no_speedup" in [note["code"] for note in correct.notes]


def test_importing_the_same_run_twice_changes_nothing(token_client, ingestor, baseline):
    client = token_client(ingestor)
    upload(client, run_zip())
    response = upload(client, run_zip())
    assert response.status_code == 200
    assert response.json()["kernels"] == {"created": 0, "updated": 0, "unchanged": 2, "warnings": []}
    assert response.json()["evaluations"]["unchanged"] == 2
    assert Run.objects.count() == 1 and Evaluation.objects.count() == 2


def test_a_run_without_results_stores_kernels_only(token_client, ingestor, problem_set, hardware):
    response = upload(token_client(ingestor), run_zip(results=None))
    assert response.status_code == 201 and Kernel.objects.count() == 2 and Evaluation.objects.count() == 0


def test_a_json_body_works_too(token_client, ingestor, problem_set, hardware):
    response = token_client(ingestor).post(URL, {**FIELDS, "kernels": FILES, "eval_results": RESULTS}, format="json")
    assert response.status_code == 201, response.content
    assert Evaluation.objects.count() == 2


def test_a_json_file_works_too(token_client, ingestor, problem_set, hardware):
    document = io.BytesIO(json.dumps({**FIELDS, "kernels": FILES, "eval_results": RESULTS}).encode())
    document.name = "run.json"
    response = token_client(ingestor).post(URL, {"file": document}, format="multipart")
    assert response.status_code == 201, response.content


def test_results_for_samples_without_a_kernel_are_skipped_with_a_warning(token_client, ingestor, problem_set, hardware):
    results = {**RESULTS, "1": RESULTS["1"] + [{**RESULTS["1"][0], "sample_id": 3}]}
    body = upload(token_client(ingestor), run_zip(results=results)).json()
    assert any("sample 3 has no kernel file" in warning for warning in body["warnings"])


def test_a_kernel_file_without_modelnew_is_imported_with_a_warning(token_client, ingestor, problem_set, hardware):
    # Issue 30: such a file imported silently, to fail later as a compile error.
    files = {
        **FILES,
        "level_1_problem_2_sample_0_kernel.py": "import torch\n\nclass Model(torch.nn.Module):\n    pass\n",
    }
    body = upload(token_client(ingestor), run_zip(files=files)).json()
    assert body["kernels"]["created"] == 2
    assert "no class ModelNew in 1 kernel file (level_1_problem_2_sample_0_kernel.py)" in " ".join(body["warnings"])
    clean = upload(token_client(ingestor), run_zip(), name="clean").json()
    assert not any("ModelNew" in warning for warning in clean["warnings"])


def test_kernels_spanning_levels_need_keyed_results(token_client, ingestor, problem_set, hardware):
    files = {**FILES, "level_2_problem_1_sample_0_kernel.py": KERNEL}
    response = upload(token_client(ingestor), run_zip(files=files))
    assert response.status_code == 400 and "span levels 1, 2" in response.json()["errors"][0]
    assert upload(token_client(ingestor), run_zip(files=files), level=1).status_code == 201
    keyed = {"level_2_problem_1": [{"sample_id": 0, "compiled": True, "correctness": False}]}
    assert upload(token_client(ingestor), run_zip(files=files, results=keyed), name="run-2").status_code == 201


def test_verify_queues_every_kernel_on_the_runs_hardware(
    token_client, ingestor, problem_set, hardware, django_capture_on_commit_callbacks
):
    client = token_client(ingestor)
    run_id = upload(client, run_zip()).json()["run"]["id"]
    with django_capture_on_commit_callbacks() as callbacks:
        response = client.post(f"/api/v1/runs/{run_id}/verify/")
    assert response.status_code == 202 and response.json()["queued"] == 2 and len(callbacks) == 2
    queued = Evaluation.objects.filter(state="queued")
    assert (
        queued.count() == 2
        and {e.origin for e in queued} == {"measured"}
        and {e.hardware for e in queued} == {hardware}
    )
    again = client.post(f"/api/v1/runs/{run_id}/verify/").json()
    assert again["queued"] == 0 and again["skipped"] == 2


def test_verify_needs_permission_and_an_existing_run(token_client, visitor, ingestor, run):
    assert token_client(visitor).post(f"/api/v1/runs/{run.pk}/verify/").status_code == 403
    assert token_client(None).post(f"/api/v1/runs/{run.pk}/verify/").status_code in (401, 403)
    assert token_client(ingestor).post("/api/v1/runs/99999/verify/").status_code == 404


def test_import_needs_permission(token_client, visitor, reviewer, problem_set, hardware):
    assert upload(token_client(visitor), run_zip()).status_code == 403
    assert upload(token_client(reviewer), run_zip()).status_code == 403
    assert upload(token_client(None), run_zip()).status_code in (401, 403)
    assert Run.objects.count() == 0


def errors_of(response) -> str:
    assert response.status_code == 400, response.content
    assert Run.objects.count() == 0 and Kernel.objects.count() == 0
    body = response.json()
    return " ".join(body.get("errors", [])) + json.dumps(body)


@pytest.mark.parametrize(
    ("entries", "message"),
    [
        ({"../level_1_problem_1_sample_0_kernel.py": KERNEL}, "climbs out"),
        ({"/abs/level_1_problem_1_sample_0_kernel.py": KERNEL}, "absolute path"),
        ({"C:/x/level_1_problem_1_sample_0_kernel.py": KERNEL}, "absolute path"),
        ({"level_1_problem_1_sample_0_kernel.py": b"\xff\xfe bad"}, "not UTF-8"),
        ({"level_1_problem_1_sample_0_kernel.py": KERNEL + "\x00"}, "NUL"),
        ({"level_1_problem_99_sample_0_kernel.py": KERNEL}, "problem 99 of level 1 is not in kb"),
        ({"level_7_problem_1_sample_0_kernel.py": KERNEL}, "not in kb"),
        (
            {"a/level_1_problem_1_sample_0_kernel.py": KERNEL, "b/level_1_problem_1_sample_0_kernel.py": KERNEL},
            "a second file",
        ),
        ({"README.md": "hi"}, "no kernel files"),
        ({"level_1_problem_1_sample_0_kernel.py": KERNEL, "eval_results.json": "{bad"}, "not valid JSON"),
        ({"level_1_problem_1_sample_0_kernel.py": KERNEL, "eval_results.json": '{"1": [], "1": []}'}, "duplicate key"),
        (
            {"level_1_problem_1_sample_0_kernel.py": KERNEL, "eval_results.json": '{"1": [{"runtime": NaN}]}'},
            "NaN is not allowed",
        ),
        (
            {"level_1_problem_1_sample_0_kernel.py": KERNEL, "eval_results.json": '{"1": [{"compiled": "yes"}]}'},
            "true or false",
        ),
        (
            {"level_1_problem_1_sample_0_kernel.py": KERNEL, "eval_results.json": '{"1": [{}, {}]}'},
            "second result for sample 0",
        ),
        ({"level_1_problem_1_sample_0_kernel.py": KERNEL, "eval_results.json": '{"one": []}'}, "not a problem id"),
        ({"level_1_problem_1_sample_0_kernel.py": KERNEL, "eval_results.json": "[1]"}, "must be an object"),
    ],
)
def test_malformed_uploads_are_400_and_write_nothing(token_client, ingestor, problem_set, hardware, entries, message):
    assert message in errors_of(upload(token_client(ingestor), make_zip(entries)))


def test_a_kernel_over_the_cap_is_refused(token_client, ingestor, problem_set, hardware, settings):
    settings.KERNEL_SOURCE_MAX_BYTES = 100
    assert "larger than 100 bytes" in errors_of(upload(token_client(ingestor), run_zip()))


def test_zip_bombs_are_refused(token_client, ingestor, problem_set, hardware, settings):
    bomb = make_zip({"level_1_problem_1_sample_0_kernel.py": "#" * 20_000_000})
    # Refused from the directory: 20 MB is more than 50 times the archive (the member's own
    # ratio, "a zip bomb?", is tests/api/test_archive_budgets.py's).
    assert "inflates to 20000000 bytes; the limit is 50 times" in errors_of(upload(token_client(ingestor), bomb))
    settings.RUN_UNCOMPRESSED_MAX_BYTES = 100
    assert "inflates to" in errors_of(upload(token_client(ingestor), run_zip()))


def test_too_many_entries_are_refused(token_client, ingestor, problem_set, hardware, settings):
    settings.RUN_MAX_ENTRIES = 3
    files = {f"level_1_problem_1_sample_{i}_kernel.py": KERNEL for i in range(4)}
    assert "the limit is 3" in errors_of(upload(token_client(ingestor), make_zip(files)))


def test_symlinks_in_the_zip_are_refused(token_client, ingestor, problem_set, hardware):
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        info = zipfile.ZipInfo("level_1_problem_1_sample_0_kernel.py")
        info.external_attr = 0o120777 << 16
        archive.writestr(info, "/etc/passwd")
    buffer.seek(0)
    buffer.name = "x.zip"
    assert "symbolic link" in errors_of(upload(token_client(ingestor), buffer))


def test_a_file_that_is_not_a_zip_or_json_is_refused(token_client, ingestor, problem_set, hardware):
    junk = io.BytesIO(b"PK\x03\x04 not really")
    junk.name = "x.zip"
    assert "not a readable zip" in errors_of(upload(token_client(ingestor), junk))
    text = io.BytesIO(b"hello")
    text.name = "x.txt"
    assert "not valid JSON" in errors_of(upload(token_client(ingestor), text))


def test_unknown_hardware_or_missing_model_is_400(token_client, ingestor, problem_set, hardware):
    assert "hardware" in errors_of(upload(token_client(ingestor), run_zip(), hardware="h999"))
    response = token_client(ingestor).post(URL, {"hardware": "cpu", "kernels": FILES}, format="json")
    assert "model" in errors_of(response)


def test_bad_kernel_names_in_json_are_400(token_client, ingestor, problem_set, hardware):
    response = token_client(ingestor).post(URL, {**FIELDS, "kernels": {"kernel.py": KERNEL}}, format="json")
    assert "not a kernel file name" in errors_of(response)


def test_neither_file_nor_kernels_is_400(token_client, ingestor, problem_set, hardware):
    assert "Send a zip" in errors_of(token_client(ingestor).post(URL, FIELDS, format="json"))


def test_an_oversized_upload_is_413(token_client, ingestor, problem_set, hardware, settings):
    settings.RUN_UPLOAD_MAX_BYTES = 100
    assert upload(token_client(ingestor), run_zip()).status_code == 413
