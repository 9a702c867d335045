"""The run's precision reaches the scoring library: the worker builds the evaluation's config with it."""

import pytest

from leaderboard.evaluations.jobs import load_inputs as _load
from leaderboard.models import Evaluation, Kernel
from tests.pagekit import REFERENCE, make_hardware, make_run, make_set

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("precision", ["fp32", "fp16", "bf16"])
def test_the_worker_passes_the_runs_precision(precision):
    run = make_run(make_set(levels=(1,)), [], precision=precision, hardware=make_hardware("cpu"))
    kernel = Kernel.objects.create(run=run, problem=run.problem_set.problems.get(), source=REFERENCE)
    evaluation = Evaluation.objects.create(kernel=kernel, hardware=run.hardware)
    _problem, _kernel, config = _load(evaluation.pk)
    assert config.precision == precision
