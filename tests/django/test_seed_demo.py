import io

import pytest
from django.core.management import call_command
from django.db import transaction
from django.db.models import Count

from leaderboard.demo import field_results_files
from leaderboard.models import Evaluation, Kernel, LanguageModel, LaunchPost, PublishedFigure, ReportedScore, Run
from problems.models import Problem

pytestmark = pytest.mark.django_db


def seed() -> str:
    out = io.StringIO()
    call_command("seed_demo", stdout=out)
    return out.getvalue()


@pytest.fixture(scope="module", autouse=True)
def seeded(django_db_setup, django_db_blocker):
    """One seeding for the module (it takes 10-20 s), in a transaction rolled back at its end: each
    test runs in a savepoint inside it, so what a test writes is still undone after it."""
    with django_db_blocker.unblock(), transaction.atomic():
        seed()
        yield
        transaction.set_rollback(True)


def test_it_loads_catalogue_scores_and_demo_runs():
    assert set(Problem.objects.values_list("level", flat=True)) == {1, 2, 3, 4}
    assert ReportedScore.objects.count() > 50
    assert Run.objects.filter(is_demo=True).count() == 3
    demo_kernels = Kernel.objects.filter(run__is_demo=True)
    assert demo_kernels.filter(latest_evaluation__isnull=False).count() == demo_kernels.count() > 0
    assert LaunchPost.objects.filter(lists_kernelbench=True).exists()


def test_it_loads_the_field_without_its_code():
    field = Kernel.objects.exclude(run__published_source="")
    assert field.count() == 413 and Run.objects.exclude(published_source="").count() == 7
    assert not field.exclude(source="").exists() and not field.filter(source_url="").exists()
    assert PublishedFigure.objects.filter(hardware__slug="l40s").count() == 413
    assert PublishedFigure.objects.filter(ranked_by_source=True).count() == 383
    field_card = field_results_files()[0]  # the card of the committed re-measurements
    assert set(Run.objects.exclude(published_source="").values_list("hardware__slug", flat=True)) == {field_card}
    assert Run.objects.filter(model__name="Claude 3.5 Sonnet").exists()  # the reported scores' record


def test_synthetic_rows_are_marked_as_demo():
    assert all(run.is_demo and run.origin == "demo" for run in Run.objects.filter(published_source=""))
    assert all(e.environment.get("demo") and e.origin == "demo" for e in Evaluation.objects.filter(origin="demo"))
    # Besides the demo rows, only the field's re-measurements (data/field/<card>_results*.jsonl).
    measured = set(Evaluation.objects.exclude(origin="demo").values_list("hardware__slug", flat=True))
    assert measured <= {field_results_files()[0]}
    demo_models = LanguageModel.objects.filter(runs__is_demo=True).distinct()
    assert demo_models.exists() and all(m.is_demo for m in demo_models)
    # Real published scores are never attached to synthetic models.
    assert not ReportedScore.objects.filter(model__is_demo=True).exists()


def test_seeding_twice_changes_nothing():
    counts = [m.objects.count() for m in (Problem, ReportedScore, Run, Kernel, Evaluation, LaunchPost)]
    seed()
    assert [m.objects.count() for m in (Problem, ReportedScore, Run, Kernel, Evaluation, LaunchPost)] == counts


def test_every_field_kernel_is_measured_here_and_the_second_pass_beside_the_first():
    """Both committed passes load: every field kernel points at a result measured on the H200, and a
    kernel of pass 2 keeps both results, so its page can say whether they agree."""
    field = Kernel.objects.exclude(run__published_source="")
    assert not field.filter(latest_evaluation__isnull=True).exists()
    twice = field.annotate(n=Count("evaluations")).filter(n=2)
    assert twice.exists() and not field.annotate(n=Count("evaluations")).filter(n__gt=2).exists()
