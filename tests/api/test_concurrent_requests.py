"""Concurrent requests (issue 20, cases 3 and 4): at most one pending evaluation per kernel and
hardware, enforced by the database and by the request path, and creation races that all answer
2xx. The thread tests need PostgreSQL (SQLite serialises every writer, and its in-memory test
database is one connection); the database-level test runs on both."""

from __future__ import annotations

import threading

import pytest
from django.db import IntegrityError, connection, transaction

from leaderboard.evaluations import queue
from leaderboard.models import Evaluation, Kernel, LanguageModel, Run
from leaderboard.reads import runs as reads
from problems.importing import find_or_create
from tests.integration.fault_report import record

from .conftest import KERNEL

postgres_only = pytest.mark.skipif("connection.vendor != 'postgresql'", reason="concurrent writers need PostgreSQL")
BODY = {"hardware": "cpu", "problem_set": "kb", "name": "run-1"}
FILES = {f"level_1_problem_{p}_sample_{s}_kernel.py": KERNEL + f"# {s}\n" for p in (1, 2) for s in range(5)}


def test_the_database_holds_one_pending_evaluation_per_kernel_and_hardware(run):
    kernel = run.kernels.first()
    Evaluation.objects.create(kernel=kernel, hardware=run.hardware, state="queued")
    with pytest.raises(IntegrityError), transaction.atomic():
        Evaluation.objects.create(kernel=kernel, hardware=run.hardware, state="running")
    # Finished ones are history: any number of them beside one pending.
    Evaluation.objects.create(kernel=kernel, hardware=run.hardware, state="failed")


def test_a_request_that_loses_the_race_on_the_constraint_skips_that_kernel(run, monkeypatch):
    """Another request queues kernel A between this request's look for busy kernels and its insert:
    the bulk insert is refused whole, then one by one A is skipped and B queued."""
    first, second = run.kernels.order_by("pk")

    def concurrent_request(user, adding):
        Evaluation.objects.create(kernel=first, hardware=run.hardware, state="queued")

    monkeypatch.setattr(queue, "check_pending_evaluations", concurrent_request)
    requested = queue.request_evaluations([first, second], run.hardware)
    assert requested.skipped == [first.pk] and [e.kernel_id for e in requested.queued] == [second.pk]
    assert Evaluation.objects.filter(state="queued").count() == 2


def test_a_second_verify_skips_and_progress_counts_kernels_and_evaluations(
    token_client, ingestor, hardware, problem_set
):
    client = token_client(ingestor)
    run_id = client.post("/api/v1/runs/import/", {**BODY, "model": "M", "kernels": FILES}, format="json").json()["run"][
        "id"
    ]
    assert client.post(f"/api/v1/runs/{run_id}/verify/").json()["queued"] == 10
    assert client.post(f"/api/v1/runs/{run_id}/verify/").json() == {"queued": 0, "skipped": 10, "evaluations": []}
    progress = reads.run_progress(Run.objects.get(pk=run_id))
    assert progress.label == "0 of 10 kernels evaluated, 10 queued" and progress.evaluations["queued"] == 10


def test_find_or_create_finds_the_row_a_concurrent_request_made_first(db):
    """The race, played in one thread: the lookup misses, another request inserts the row, our
    insert hits the unique constraint, and the row is found on the retry."""
    LanguageModel.objects.create(name="Raced")
    looks = iter([None])
    model, created = find_or_create(
        lambda: next(looks, None) or LanguageModel.objects.filter(name="Raced").first(),
        lambda: LanguageModel.objects.create(name="Raced"),
    )
    assert (model.name, created) == ("Raced", False) and LanguageModel.objects.filter(name="Raced").count() == 1


def _at_once(n: int, call) -> list:
    """Run `call(i)` in n threads released together; their results (or exceptions)."""
    barrier, results = threading.Barrier(n), [None] * n

    def worker(i: int) -> None:
        try:
            barrier.wait()
            results[i] = call(i)
        except Exception as exc:  # noqa: BLE001 - reported to the test
            results[i] = exc
        finally:
            connection.close()

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return results


@postgres_only
@pytest.mark.django_db(transaction=True)
def test_two_concurrent_verifies_queue_one_set_of_evaluations(token_client, admin_user, hardware, problem_set):
    # admin_user, not the ingestor fixture: a transactional test before may have flushed the groups.
    client = token_client(admin_user)
    run_id = client.post("/api/v1/runs/import/", {**BODY, "model": "M", "kernels": FILES}, format="json").json()["run"][
        "id"
    ]
    replies = _at_once(2, lambda _: token_client(admin_user).post(f"/api/v1/runs/{run_id}/verify/"))
    assert [reply.status_code for reply in replies] == [202, 202], replies
    bodies = sorted((r.json()["queued"], r.json()["skipped"]) for r in replies)
    rows = Evaluation.objects.filter(kernel__run_id=run_id, state="queued").count()
    label = reads.run_progress(Run.objects.get(pk=run_id)).label
    record("3. two concurrent verifies of a 10-kernel run", replies=bodies, evaluations=rows, progress=label)
    assert bodies == [(0, 10), (10, 0)]
    assert rows == 10
    assert label == "0 of 10 kernels evaluated, 10 queued"


@postgres_only
@pytest.mark.django_db(transaction=True)
def test_five_concurrent_imports_naming_a_new_model_all_answer_2xx(token_client, admin_user, hardware, problem_set):
    body = {**BODY, "model": "Brand New Model", "organization": "New Lab", "kernels": FILES}
    replies = _at_once(5, lambda _: token_client(admin_user).post("/api/v1/runs/import/", body, format="json"))
    record(
        "4. five concurrent imports naming a new model",
        statuses=sorted(r.status_code for r in replies),
        models=LanguageModel.objects.filter(name="Brand New Model").count(),
        runs=Run.objects.count(),
    )
    assert sorted(reply.status_code for reply in replies) == [200, 200, 200, 200, 201], replies
    assert LanguageModel.objects.filter(name="Brand New Model").count() == 1
    assert Run.objects.count() == 1 and Kernel.objects.count() == 10
