"""Every write marks once: a stored result, measured here or imported, marks its kernel's problem for
the boards' re-scorer through one route (the evaluation's post_save signal), never twice."""

from __future__ import annotations

import pytest

from leaderboard.boards import marks as board_marks
from leaderboard.evaluations import attempts
from leaderboard.ingest.results_exchange import import_records, record
from leaderboard.models import Evaluation
from tests.django.reviews_factories import world_fixture  # noqa: F401  (fixtures)
from tests.rescoring import run_rescorer

pytestmark = pytest.mark.django_db

CORRECT = {"status": "correct", "compiled": True, "correct": True, "speedup": 3.0}


@pytest.fixture
def marks(monkeypatch) -> list[tuple]:
    """Every call of the marking route from now on, as (function, places); each still marks."""
    calls: list[tuple] = []
    for name in ("mark_runs", "mark_problems"):
        real = getattr(board_marks, name)

        def spy(places, real=real, name=name):
            places = list(places)
            calls.append((name, sorted(places)))
            return real(places)

        monkeypatch.setattr(board_marks, name, spy)
    return calls


def test_a_stored_result_marks_its_problem_once(world, marks):
    kernel = world.kernel(world.problems[0], speedup=2.0)
    evaluation = Evaluation.objects.create(kernel=kernel, hardware=world.hardware)
    claim = attempts.claim(evaluation.pk, "gpu-host.1")
    run_rescorer()
    marks.clear()
    assert attempts.store_result(claim, CORRECT)
    assert marks == [("mark_problems", [(world.run.pk, world.problems[0].pk)])]


def test_an_imported_result_marks_its_problem_once(world, marks):
    kernel = world.kernel(world.problems[0], speedup=2.0)
    exported = record(kernel.latest_evaluation)
    Evaluation.objects.filter(kernel=kernel).delete()
    run_rescorer()
    marks.clear()
    assert import_records([exported], by="manage.py test").counts["created"] == 1
    assert marks == [("mark_problems", [(world.run.pk, world.problems[0].pk)])]
