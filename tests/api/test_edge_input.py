"""Inputs that PostgreSQL refuses where SQLite shrugs (NUL bytes, lone surrogates, huge integers):
each must come back as a 4xx, never a 5xx."""

import json

import pytest

from .conftest import KERNEL


@pytest.mark.parametrize(
    ("url", "body"),
    [
        ("/api/v1/submissions/", {"problem": 10**30, "source": KERNEL, "hardware": "cpu", "model": "model-a"}),
        ("/api/v1/submissions/", {"problem": 1, "source": KERNEL, "hardware": "c\x00pu", "model": "model-a"}),
        ("/api/v1/submissions/", {"problem": 1, "source": KERNEL, "hardware": "cpu", "model": "m\ud800"}),
        ("/api/v1/submissions/", {"problem": 1, "source": KERNEL, "run": 10**30}),
        (
            "/api/v1/reported-scores/",
            {
                "model": "M\ud800",
                "variant": "v",
                "metric": "m",
                "value": 1,
                "unit": "x",
                "date": "2025-01-01",
                "source_url": "https://a.example/",
            },
        ),
        ("/api/v1/launch-posts/", {"date": "2025-01-01", "lab": "L\ud800", "title": "t", "url": "https://a.example/"}),
        ("/api/v1/runs/import/", {"model": "M", "hardware": "c\x00pu", "kernels": {}}),
        (
            "/api/v1/runs/import/",
            {
                "model": "M",
                "hardware": "cpu",
                "problem_set": "kb",
                "kernels": {"level_1_problem_1_sample_0_kernel.py": KERNEL},
                "eval_results": {"1": [{"compiled": True, "metadata": {"a": "\x00\ud800"}}]},
            },
        ),
        (
            "/api/v1/runs/import/",
            {
                "model": "M",
                "hardware": "cpu",
                "problem_set": "kb",
                "kernels": {"level_1_problem_1_sample_0_kernel.py": KERNEL},
                "eval_results": {"1": [{"compiled": True, "runtime_stats": {"\x00": 1}}]},
            },
        ),
        (
            "/api/v1/runs/import/",
            {
                "model": "M",
                "hardware": "cpu",
                "problem_set": "kb",
                "kernels": {"level_99999999999999999999_problem_1_sample_0_kernel.py": KERNEL},
            },
        ),
        ("/api/v1/reviews/", {"kernel": 10**30, "verdict": "clean"}),
    ],
)
def test_hostile_bodies_are_4xx(token_client, admin_user, problem_set, hardware, model, url, body):
    # json.dumps escapes lone surrogates (\\ud800) as a hostile client would send them.
    response = token_client(admin_user).generic("POST", url, json.dumps(body), content_type="application/json")
    assert 400 <= response.status_code < 500, response.content


@pytest.mark.parametrize(
    "query",
    [
        "/api/v1/kernels/?run=100000000000000000000000",
        "/api/v1/evaluations/?kernel=100000000000000000000000",
        "/api/v1/reviews/?kernel=100000000000000000000000",
        "/api/v1/kernels/100000000000000000000000/",
        "/api/v1/runs/?model=%00",
        "/api/v1/models/?lab=a%00",
    ],
)
def test_hostile_queries_are_not_5xx(client, db, query):
    assert client.get(query).status_code < 500
