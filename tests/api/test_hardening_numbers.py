"""Issue 28, case 1: one import with runtime 4e-320 ms made an infinite speedup, stored in
Evaluation.speedup; re-scoring then failed on PostgreSQL ("invalid input syntax for type json") and
every board and API page answered 500 while /healthz said ok. A runtime of 1e-300 showed a 2e+300
speedup.

Now: a physical floor on runtimes and a ceiling on speedups at every way in (run import, the
worker's result store, the database's own constraints), and a run that fails to score anyway is set
aside (its last scores stay; admin, /healthz and /metrics say so) while every other page answers."""

from __future__ import annotations

import math
from unittest import mock

import pytest
from django.db import IntegrityError, transaction

from evaluation.results.metrics import MAX_SPEEDUP, MIN_RUNTIME_MS
from leaderboard.boards import marks as board_marks
from leaderboard.boards import rescoring as board_rescoring
from leaderboard.boards import scoring
from leaderboard.evaluations import attempts
from leaderboard.models import DirtyRun, Evaluation, Kernel, Run, RunScore
from tests.api.conftest import KERNEL

pytestmark = pytest.mark.django_db

BOARD_PAGES = ["/", "/levels/all/", "/levels/1/", "/api/v1/leaderboard/", "/api/v1/runs/", "/api/v1/kernels/",
               "/api/v1/evaluations/"]  # fmt: skip


def _import(client, runtime, name="tiny"):
    body = {
        "model": "M", "hardware": "cpu", "problem_set": "kb", "name": name,
        "kernels": {"level_1_problem_1_sample_0_kernel.py": KERNEL},
        "eval_results": {"1": [{"sample_id": 0, "compiled": True, "correctness": True, "runtime": runtime}]},
    }  # fmt: skip
    return client.post("/api/v1/runs/import/", body, format="json")


@pytest.mark.parametrize("runtime", [4e-320, 5e-324, 1e-308, 1e-300, MIN_RUNTIME_MS / 2])
def test_an_import_under_the_runtime_floor_is_refused_and_writes_nothing(token_client, ingestor, baseline, runtime):
    before = (Run.objects.count(), Evaluation.objects.count())
    reply = _import(token_client(ingestor), runtime)
    assert reply.status_code == 400, reply.content
    assert "under the physical floor" in reply.content.decode()
    assert (Run.objects.count(), Evaluation.objects.count()) == before
    for path in BOARD_PAGES:
        assert token_client(None).get(path).status_code == 200, path


def test_an_import_whose_speedup_is_over_the_ceiling_is_refused(token_client, ingestor, baseline):
    baseline.mean_ms = 1e9  # the plausible maximum: 1e9 ms / 1e-4 ms is 1e13
    baseline.save()
    reply = _import(token_client(ingestor), MIN_RUNTIME_MS)
    assert reply.status_code == 400, reply.content
    assert "over the ceiling" in reply.content.decode()
    assert not Evaluation.objects.filter(speedup__isnull=False, origin="imported").exists()


def test_a_plausible_import_still_scores(token_client, ingestor, baseline):
    reply = _import(token_client(ingestor), 0.5)
    assert reply.status_code == 201, reply.content
    assert Evaluation.objects.get(origin="imported").speedup == pytest.approx(4.0)


def test_the_database_refuses_an_infinite_or_absurd_speedup(run):
    kernel = run.kernels.first()
    for value in (math.inf, MAX_SPEEDUP * 10):
        with pytest.raises(IntegrityError), transaction.atomic():
            Evaluation.objects.filter(kernel=kernel).update(speedup=value)


@pytest.mark.parametrize(
    "reply",
    [
        {"speedup": math.inf, "kernel_ms": {"median": 0.0}, "reference_ms": {"median": 2.0}},
        {"speedup": 2e300, "kernel_ms": {"median": 1e-300}, "reference_ms": {"median": 2.0}},
        {"speedup": 4.0, "kernel_ms": {"median": 1e-6}, "reference_ms": {"median": 4e-6}},
        {"speedup": math.nan, "kernel_ms": {"median": math.nan, "process_ratio": math.inf}, "reference_ms": {}},
    ],
)
def test_the_worker_stores_no_speedup_out_of_bounds_and_flags_it(run, hardware, reply):
    kernel = run.kernels.first()
    evaluation = Evaluation(kernel=kernel, hardware=hardware)
    data = {"status": "correct", "correct": True, "compiled": True, "speedup_interval": [1.0, math.inf],
            "max_abs_diff": math.inf, **reply}  # fmt: skip
    attempts._apply_verdict(evaluation, data)
    assert evaluation.speedup is None and evaluation.speedup_low is None
    assert [flag["code"] for flag in evaluation.flags] == ["implausible_speedup"]
    assert evaluation.max_abs_diff is None
    assert all(v is None or math.isfinite(v) for v in evaluation.kernel_timing.values())
    evaluation.state = Evaluation.State.DONE
    evaluation.save()  # storable on PostgreSQL too (jsonb refuses Infinity)


def test_the_worker_keeps_a_plausible_speedup(run, hardware):
    evaluation = Evaluation(kernel=run.kernels.first(), hardware=hardware)
    attempts._apply_verdict(evaluation, {"status": "correct", "correct": True, "compiled": True, "speedup": 3.0,
                                         "speedup_interval": [2.5, 3.5], "kernel_ms": {"median": 0.01}})  # fmt: skip
    assert (evaluation.speedup, evaluation.speedup_low, evaluation.speedup_high, evaluation.flags) == (
        3.0,
        2.5,
        3.5,
        [],
    )


def test_a_run_that_fails_to_score_is_set_aside_and_every_page_answers(client, run, problem_set, hardware, model):
    """A fault injected into the scoring of one run (the database now refuses the infinite speedup
    that did it in production, so the failure is made by hand): the other run is scored, the bad
    one keeps its last stored scores and is reported; every board page still answers 200."""
    other = Run.objects.create(model=model, problem_set=problem_set, hardware=hardware, setting="agent")
    Kernel.objects.create(run=other, problem=problem_set.problems.get(level=1, number=1), source=KERNEL + "#\n")
    board_rescoring.refresh_runs([run.pk, other.pk])
    stored = RunScore.objects.filter(run=run).count()
    real = scoring.fold

    def fails_for_the_first_run(entries):
        if any(entry[scoring.S0_SPEEDUP] == 2.0 for entry in entries.values()):
            raise ValueError("kernel 1: speedup inf is not a finite number")
        return real(entries)

    board_marks.mark_runs([run.pk, other.pk])  # in a test's transaction: the marks, no refresh yet
    with mock.patch.object(scoring, "fold", side_effect=fails_for_the_first_run):
        board_rescoring.refresh_runs([run.pk, other.pk])  # what the write's after-commit hook runs
    aside = DirtyRun.objects.get(run_id=run.pk)
    assert aside.failed_at is not None and "not a finite number" in aside.error
    assert not DirtyRun.objects.filter(run_id=other.pk).exists()  # the other run was scored
    assert RunScore.objects.filter(run=run).count() == stored  # its last scores stay on the boards
    for path in BOARD_PAGES:
        assert client.get(path).status_code == 200, path
    health = client.get("/healthz").json()
    reachable = all(check["ok"] for check in health["checks"].values())  # Redis may not run here
    assert health["boards"]["ok"] is False and health["status"] == ("degraded" if reachable else "unavailable")
    board_marks.mark_runs([run.pk])  # a write marks it again: re-scored after it, no longer set aside
    board_rescoring.refresh_runs([run.pk])
    assert not DirtyRun.objects.filter(run_id=run.pk).exists()
    assert client.get("/healthz").json()["boards"]["ok"] is True


def test_a_speedup_stored_before_the_fix_sets_its_run_aside(run):
    """Rows stored before the constraint (here: its check bypassed by an UPDATE on SQLite, which
    lets Python's inf through a raw cursor): the run is set aside, not the boards taken down."""
    from django.db import connection

    if connection.vendor != "sqlite":
        pytest.skip("PostgreSQL enforces the constraint even for raw SQL")
    kernel = run.kernels.get(latest_evaluation__speedup=2.0)
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA ignore_check_constraints = ON")
        cursor.execute("UPDATE leaderboard_evaluation SET speedup = 9e999 WHERE id = %s", [kernel.latest_evaluation_id])
        cursor.execute("PRAGMA ignore_check_constraints = OFF")
    board_rescoring.refresh_runs([run.pk])
    assert DirtyRun.objects.get(run_id=run.pk).failed_at is not None
