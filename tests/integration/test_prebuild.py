"""The worker's look-ahead builds: the next queued evaluations' kernels go to the build pool, in queue
order, once each (real Redis and database; the pool is a recorder, the real builds are tested in
tests/evaluation/test_build_stage.py)."""

from __future__ import annotations

from leaderboard.evaluations.prebuild import submit_upcoming, upcoming_evaluations
from leaderboard.models import Run
from problems.models import Hardware
from tests.integration.conftest import CORRECT_KERNEL, submit

NEEDS_BUILD = "from torch.utils.cpp_extension import load_inline  # {n}\n" + CORRECT_KERNEL


class RecordingPool:
    workers = 2
    pending = 0

    def __init__(self):
        self.sources: list[str] = []
        self.problems: list[str] = []

    def submit(self, source, cfg=None):
        assert cfg is not None and cfg.timeout_s > 0  # the job's own options
        self.sources.append(source)

    def find_sizes(self, problem_source, cfg=None):
        assert cfg is not None and cfg.device == "cuda"
        self.problems.append(problem_source)


def test_upcoming_kernels_are_built_ahead_in_queue_order(env, make_kernels, cpu):
    kernels = make_kernels([NEEDS_BUILD.format(n=1), CORRECT_KERNEL, NEEDS_BUILD.format(n=2), NEEDS_BUILD.format(n=3)])
    evaluations = submit(kernels, cpu)
    assert upcoming_evaluations(["eval-cpu"], 10) == [e.pk for e in evaluations]
    pool, seen = RecordingPool(), set()
    assert submit_upcoming(pool, ["eval-cpu"], 3, seen) == 2  # the first three jobs; one needs no build
    assert pool.sources == [kernels[0].source, kernels[2].source]
    assert submit_upcoming(pool, ["eval-cpu"], 10, seen) == 1  # only what it had not seen
    assert pool.sources[-1] == kernels[3].source
    assert submit_upcoming(pool, ["eval-cpu"], 10, seen) == 0


def test_on_a_gpu_the_problems_sizes_are_found_ahead_beside_the_builds(env, make_kernels):
    gpu = Hardware.objects.create(slug="h200", name="NVIDIA H200", kind=Hardware.Kind.GPU)
    kernels = make_kernels([NEEDS_BUILD.format(n=1), CORRECT_KERNEL])
    Run.objects.filter(pk=kernels[0].run_id).update(hardware=gpu)
    submit(kernels, gpu)
    pool = RecordingPool()
    assert submit_upcoming(pool, ["eval-h200"], 10, set()) == 1
    assert pool.problems == [k.problem.source for k in kernels]  # every job's, built or not, in queue order
    assert pool.sources == [kernels[0].source]
