import io

import pytest
from django.core.management import call_command

from leaderboard.models import Evaluation, Kernel, LanguageModel, LaunchPost, PublishedFigure, ReportedScore, Run
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
    demo_kernels = Kernel.objects.filter(run__is_demo=True)
    assert demo_kernels.filter(latest_evaluation__isnull=False).count() == demo_kernels.count() > 0
    assert LaunchPost.objects.filter(lists_kernelbench=True).exists()


def test_it_loads_the_field_without_its_code():
    seed()
    field = Kernel.objects.exclude(run__published_source="")
    assert field.count() == 413 and Run.objects.exclude(published_source="").count() == 7
    assert not field.exclude(source="").exists() and not field.filter(source_url="").exists()
    assert PublishedFigure.objects.filter(hardware__slug="l40s").count() == 413
    assert PublishedFigure.objects.filter(ranked_by_source=True).count() == 383
    assert set(Run.objects.exclude(published_source="").values_list("hardware__slug", flat=True)) == {"h200"}
    assert Run.objects.filter(model__name="Claude 3.5 Sonnet").exists()  # the reported scores' record


def test_synthetic_rows_are_marked_as_demo():
    seed()
    assert all(run.is_demo and run.origin == "demo" for run in Run.objects.filter(published_source=""))
    assert all(e.environment.get("demo") and e.origin == "demo" for e in Evaluation.objects.filter(origin="demo"))
    # Besides the demo rows, only the field's H200 re-measurements (data/field/h200_results*.jsonl).
    assert set(Evaluation.objects.exclude(origin="demo").values_list("hardware__slug", flat=True)) <= {"h200"}
    demo_models = LanguageModel.objects.filter(runs__is_demo=True).distinct()
    assert demo_models.exists() and all(m.is_demo for m in demo_models)
    # Real published scores are never attached to synthetic models.
    assert not ReportedScore.objects.filter(model__is_demo=True).exists()


def test_seeding_twice_changes_nothing():
    seed()
    counts = [m.objects.count() for m in (Problem, ReportedScore, Run, Kernel, Evaluation, LaunchPost)]
    seed()
    assert [m.objects.count() for m in (Problem, ReportedScore, Run, Kernel, Evaluation, LaunchPost)] == counts
