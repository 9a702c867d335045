import io

import pytest
from django.core.management import call_command

from leaderboard.models import Evaluation, Kernel, LanguageModel, LaunchPost, ReportedScore, Run
from problems.models import Problem

pytestmark = pytest.mark.django_db


def seed() -> str:
    out = io.StringIO()
    call_command("seed_demo", stdout=out)
    return out.getvalue()


def test_it_loads_catalogue_scores_and_demo_runs():
    seed()
    assert set(Problem.objects.values_list("level", flat=True)) == {1, 2, 3, 4}
    assert ReportedScore.objects.count() > 50
    assert Run.objects.filter(is_demo=True).count() == 3
    assert Kernel.objects.filter(latest_evaluation__isnull=False).count() == Kernel.objects.count()
    assert LaunchPost.objects.filter(lists_kernelbench=True).exists()


def test_synthetic_rows_are_marked_as_demo():
    seed()
    assert all(run.is_demo and run.origin == "demo" for run in Run.objects.all())
    assert all(e.environment.get("demo") and e.origin == "demo" for e in Evaluation.objects.all())
    demo_models = LanguageModel.objects.filter(runs__isnull=False).distinct()
    assert demo_models.exists() and all(m.is_demo for m in demo_models)
    # Real published scores are never attached to synthetic models.
    assert not ReportedScore.objects.filter(model__is_demo=True).exists()


def test_seeding_twice_changes_nothing():
    seed()
    counts = [m.objects.count() for m in (Problem, ReportedScore, Run, Kernel, Evaluation, LaunchPost)]
    seed()
    assert [m.objects.count() for m in (Problem, ReportedScore, Run, Kernel, Evaluation, LaunchPost)] == counts
