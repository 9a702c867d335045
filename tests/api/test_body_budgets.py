"""Issue 19, case 3: work budgets on request bodies. The strict JSON reader's duplicate-key check is
linear (a count per key was quadratic: 17.5 s of CPU for a 209 KB body of 20,000 keys, 177 s for a
2.8 MB run of 40,000 kernels); object keys are counted while parsing and the parse stops past
settings.JSON_MAX_KEYS; every API body is capped before parsing (the route's own cap, else
settings.API_BODY_MAX_BYTES), and any request body at settings.REQUEST_BODY_MAX_BYTES.

Work is measured as operations, not wall time: the keys json hands to the reader are wrapped so
that every comparison and hash of a key counts, and a run past its budget stops at once."""

from __future__ import annotations

import json
from contextlib import contextmanager
from types import SimpleNamespace
from unittest import mock

import pytest
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from leaderboard.ingest import uploads
from leaderboard.models import Kernel, KernelReport, Run
from tests.budgets import OverBudget

RUNS = "/api/v1/runs/import/"


class _Counter:
    def __init__(self, budget: int):
        self.budget, self.operations = budget, 0

    def count(self) -> None:
        self.operations += 1
        if self.operations > self.budget:
            raise OverBudget(f"more than {self.budget} key comparisons and hashes")


@contextmanager
def counted_keys(budget: int):
    """While inside, every key strict_json's reader is handed counts its == and hash() on `counter`."""
    counter = _Counter(budget)

    class Key(str):
        __slots__ = ()

        def __eq__(self, other):
            counter.count()
            return str.__eq__(self, other)

        def __hash__(self):
            counter.count()
            return str.__hash__(self)

    def loads(text, object_pairs_hook, **options):
        return json.loads(
            text, object_pairs_hook=lambda pairs: object_pairs_hook([(Key(k), v) for k, v in pairs]), **options
        )

    with mock.patch.object(uploads, "json", SimpleNamespace(loads=loads)):
        yield counter


def an_object(keys: int, duplicate_at: int | None = None) -> str:
    names = [f"key-{i}" for i in range(keys)]
    if duplicate_at is not None and names:
        names.insert(duplicate_at % (len(names) + 1), names[duplicate_at % len(names)])
    return "{" + ",".join(f'"{name}": {i}' for i, name in enumerate(names)) + "}"


@hsettings(max_examples=40, deadline=None)
@given(st.integers(min_value=0, max_value=4000), st.none() | st.integers(min_value=0, max_value=10**6))
def test_the_duplicate_key_check_is_linear_in_the_keys(keys, duplicate_at):
    text = an_object(keys, duplicate_at)
    total = keys + (duplicate_at is not None and keys > 0)
    with counted_keys(budget=3 * total + 10) as counter:
        if duplicate_at is not None and keys:
            with pytest.raises(ValueError, match="duplicate key"):
                uploads.strict_json(text)
        else:
            assert len(uploads.strict_json(text)) == keys
    assert counter.operations <= 3 * total + 10


@hsettings(max_examples=40, deadline=None)
@given(st.integers(min_value=1, max_value=300), st.integers(min_value=1, max_value=20), st.integers(1, 2000))
def test_keys_are_counted_while_parsing_and_the_parse_stops_past_the_limit(objects, keys, limit):
    text = "[" + ",".join(an_object(keys) for _ in range(objects)) + "]"
    calls = []
    real = uploads._ObjectReader.__call__

    def spy(reader, pairs):
        calls.append(len(pairs))
        return real(reader, pairs)

    with mock.patch.object(uploads._ObjectReader, "__call__", spy):
        if objects * keys > limit:
            with pytest.raises(ValueError, match=f"more than {limit} keys"):
                uploads.strict_json(text, max_keys=limit)
            assert sum(calls) <= limit + keys  # stopped at the first object past the limit
        else:
            assert len(uploads.strict_json(text, max_keys=limit)) == objects


def test_the_issue_report_body_is_413_naming_the_limit(token_client, visitor, run):
    """20,000 keys in 209 KB to /api/v1/kernels/<id>/reports/: refused before parsing."""
    kernel = Kernel.objects.filter(run=run).first()
    body = an_object(20_000)[:-1] + ', "reason": "x"}'
    response = token_client(visitor).post(
        f"/api/v1/kernels/{kernel.pk}/reports/", body, content_type="application/json"
    )
    assert response.status_code == 413 and "the limit here is 100000 bytes" in response.json()["detail"]
    assert KernelReport.objects.count() == 0


def test_the_issue_run_body_of_40000_kernels_is_a_400_in_linear_work(token_client, ingestor, problem_set, hardware):
    kernels = {f"level_1_problem_1_sample_{i}_kernel.py": "x" for i in range(40_000)}
    body = json.dumps({"model": "M", "hardware": "cpu", "problem_set": problem_set.slug, "kernels": kernels})
    runs_before = Run.objects.count()
    with counted_keys(budget=3 * 40_010) as counter:
        response = token_client(ingestor).post(RUNS, body, content_type="application/json")
    assert response.status_code == 400 and "the limit is 20000" in response.content.decode()
    assert counter.operations <= 3 * 40_010 and Run.objects.count() == runs_before


def test_a_body_with_more_keys_than_json_max_keys_is_a_400_naming_it(token_client, ingestor, problem_set, settings):
    settings.JSON_MAX_KEYS = 100
    kernels = {f"level_1_problem_1_sample_{i}_kernel.py": "x" for i in range(200)}
    body = {"model": "M", "hardware": "cpu", "problem_set": problem_set.slug, "kernels": kernels}
    response = token_client(ingestor).post(RUNS, body, format="json")
    assert response.status_code == 400 and "more than 100 keys" in response.json()["detail"]


def test_every_api_body_has_a_cap_before_parsing(token_client, reviewer, run, settings):
    settings.API_BODY_MAX_BYTES = 50
    kernel = Kernel.objects.filter(run=run).first()
    response = token_client(reviewer).post(
        f"/api/v1/kernels/{kernel.pk}/reviews/", {"verdict": "clean", "note": "n" * 100}, format="json"
    )
    assert response.status_code == 413 and "the limit here is 50 bytes" in response.json()["detail"]
    form = token_client(reviewer).post("/api/v1/reviews/", {"kernel": kernel.pk, "note": "n" * 100})
    assert form.status_code == 413


def test_any_request_body_over_the_site_cap_is_413_before_a_view_reads_it(client, token_client, ingestor, settings):
    settings.REQUEST_BODY_MAX_BYTES = 1000
    page = client.post("/sign-in/", {"username": "u" * 2000, "password": "p"})
    assert page.status_code == 413 and "the limit is 1000 bytes" in page.content.decode()
    api = token_client(ingestor).post(RUNS, {"kernels": {"a": "x" * 2000}}, format="json")
    assert api.status_code == 413 and "the limit is 1000 bytes" in api.json()["detail"]
