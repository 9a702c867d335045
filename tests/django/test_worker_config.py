import pytest
from django.conf import settings

from leaderboard.evaluations.jobs import _load
from leaderboard.evaluations.queue import request_evaluation
from leaderboard.models import Kernel, LanguageModel, Run
from problems.models import Hardware, Problem, ProblemSet

pytestmark = pytest.mark.django_db


@pytest.fixture
def evaluation():
    problem_set = ProblemSet.objects.create(name="S", slug="s", atol=1e-2, rtol=1e-3)
    problem = Problem.objects.create(problem_set=problem_set, level=1, number=1, name="P", source="# reference")
    hardware = Hardware.objects.create(slug="h200", name="H200", kind=Hardware.Kind.GPU)
    run = Run.objects.create(model=LanguageModel.objects.create(name="M"), problem_set=problem_set, hardware=hardware)
    kernel = Kernel.objects.create(run=run, problem=problem, source="# kernel")
    return request_evaluation(kernel, hardware)


def test_the_worker_hides_the_sites_private_files_from_kernels(evaluation):
    _, _, config = _load(evaluation.pk)
    assert str(settings.VAR_DIR) in config.hide_paths


def test_the_worker_passes_device_and_the_sets_tolerances(evaluation):
    problem_source, kernel_source, config = _load(evaluation.pk)
    assert (problem_source, kernel_source) == ("# reference", "# kernel")
    assert (config.device, config.atol, config.rtol) == ("cuda", 1e-2, 1e-3)
