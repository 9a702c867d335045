"""The site's refusals as `kbl` prints them (issue 30): the valid values and the command's own flag
named, one error a line, never raw JSON. The replies come from the real API (Django's test client);
kbl renders them as it would over HTTP."""

from __future__ import annotations

import pytest

from kbl.cli import FLAGS
from kbl.http import _error
from problems.models import Hardware, ProblemSet

from .conftest import KERNEL
from .test_run_import import URL, run_zip, upload

pytestmark = pytest.mark.django_db


def printed(response, command: str) -> str:
    """What `kbl COMMAND` prints for this reply (after "kbl: ")."""
    assert 400 <= response.status_code < 500, response.content
    return _error(response.status_code, response.content).render(FLAGS[command])


def test_an_unknown_hardware_names_the_flag_and_every_valid_slug(token_client, ingestor, problem_set, hardware):
    Hardware.objects.create(slug="h200", name="NVIDIA H200")
    text = printed(upload(token_client(ingestor), run_zip(), hardware="h999"), "submit")
    assert "--hardware: no hardware 'h999'; the hardware: cpu (CPU), h200 (NVIDIA H200)" in text
    assert "{" not in text and "[" not in text  # no raw JSON


def test_an_unknown_set_names_the_flag_and_the_sets(token_client, ingestor, problem_set, hardware):
    text = printed(upload(token_client(ingestor), run_zip(), problem_set="nope"), "submit")
    assert "Nothing was imported: 1 error in the " in text
    assert "problem(s)" not in text
    assert "--set: no problem set 'nope'; the sets: kb (KernelBench test)" in text


def test_an_ambiguous_set_asks_for_the_flag(token_client, ingestor, problem_set, hardware):
    twin = ProblemSet.objects.create(slug="twin", name="Twin")
    for problem in problem_set.problems.all():
        problem.pk, problem.problem_set = None, twin
        problem.save()
    fields = {"model": "Model B", "hardware": "cpu", "file": run_zip()}
    text = printed(token_client(ingestor).post(URL, fields, format="multipart"), "submit")
    assert "--set: name one (more than one set holds every problem of these kernels)" in text
    assert "give problem_set" not in text


def test_errors_are_counted_in_words(token_client, ingestor, problem_set, hardware):
    bad = {"level_1_problem_9_sample_0_kernel.py": KERNEL, "level_1_problem_8_sample_0_kernel.py": KERNEL}
    body = upload(token_client(ingestor), run_zip(results=None, files=bad)).json()
    assert body["detail"].startswith(f"Nothing was imported: {len(body['errors'])} errors in")


def test_an_unknown_problem_id_says_where_to_find_one(token_client, ingestor, problem_set, hardware):
    body = {"problem": 9999, "source": KERNEL, "hardware": "cpu", "model": "model-a"}
    text = printed(token_client(ingestor).post("/api/v1/submissions/", body, format="json"), "kernel")
    assert "PROBLEM: no problem 9999; find a problem's id with /api/v1/problems/?set=SET&level=L&number=N" in text
