import django_rq
import pytest
from django.conf import settings
from django_rq.settings import get_queues_list
from django_rq.workers import get_worker_class
from rq import Worker

from evaluation import EvaluationConfig
from evaluation.builds import pool as build_pool
from evaluation.results.harness_id import harness_digest
from leaderboard.evaluations import cores
from leaderboard.evaluations.jobs import load_inputs as _load
from leaderboard.evaluations.queue import eval_queue, request_evaluation
from leaderboard.evaluations.rq_worker import EvalWorker
from leaderboard.evaluations.worker_pool import default_worker_count, worker_commands
from leaderboard.models import Kernel, LanguageModel, Run
from problems.models import Hardware, Problem, ProblemSet, ScoringRules

pytestmark = pytest.mark.django_db


@pytest.fixture
def evaluation():
    rules = ScoringRules.objects.create(
        slug="loose",
        name="Loose",
        kernelbench_version="v0",
        fp32_tolerance=2e-2,
        fp16_tolerance=3e-2,
        bf16_tolerance=4e-2,
    )
    problem_set = ProblemSet.objects.create(name="S", slug="s", rules=rules)
    problem = Problem.objects.create(problem_set=problem_set, level=1, number=1, name="P", source="# reference")
    hardware = Hardware.objects.create(slug="h200", name="H200", kind=Hardware.Kind.GPU)
    run = Run.objects.create(model=LanguageModel.objects.create(name="M"), problem_set=problem_set, hardware=hardware)
    kernel = Kernel.objects.create(run=run, problem=problem, source="# kernel")
    return request_evaluation(kernel, hardware)


def test_the_worker_hides_the_sites_private_files_from_kernels(evaluation):
    _, _, config = _load(evaluation.pk)
    assert str(settings.VAR_DIR) in config.hide_paths


def test_the_worker_passes_device_and_the_rules_tolerance_for_the_runs_precision(evaluation):
    problem_source, kernel_source, config = _load(evaluation.pk)
    assert (problem_source, kernel_source) == ("# reference", "# kernel")
    assert (config.device, config.atol, config.rtol) == ("cuda", 2e-2, 2e-2)
    Run.objects.filter(pk=evaluation.kernel.run_id).update(precision="bf16")
    assert (_load(evaluation.pk)[2].atol, _load(evaluation.pk)[2].rtol) == (4e-2, 4e-2)


def test_the_worker_passes_the_trial_settings_only_when_set(evaluation, settings):
    settings.EVAL_TIMING_TRIALS = 3
    settings.EVAL_CORRECTNESS_TRIALS = None
    _, _, config = _load(evaluation.pk)
    assert config.timing_trials == 3
    assert config.correctness_trials == EvaluationConfig().correctness_trials


def test_the_worker_passes_the_memory_limit_setting_through(evaluation, settings, monkeypatch):
    monkeypatch.delenv("EVAL_MEMORY_LIMIT_MB", raising=False)
    settings.EVAL_MEMORY_LIMIT_MB = None
    assert _load(evaluation.pk)[2].memory_limit_mb == EvaluationConfig().memory_limit_mb  # the host's default
    settings.EVAL_MEMORY_LIMIT_MB = 2500
    assert _load(evaluation.pk)[2].memory_limit_mb == 2500


def test_the_worker_pins_evaluations_to_the_cores_it_is_given(evaluation, settings, monkeypatch):
    monkeypatch.setattr(cores, "host_gpu_count", lambda: 0)  # a host without GPUs: EVAL_CPUS as it is
    assert _load(evaluation.pk)[2].cpus == ()
    settings.EVAL_CPUS = (3,)
    assert _load(evaluation.pk)[2].cpus == (3,)
    assert cores.builder_cpus() is None


def test_a_gpu_hosts_workers_time_on_their_gpus_core_and_the_builder_keeps_off_them(evaluation, settings, monkeypatch):
    # 16 CPUs, cpu N and N+8 on one physical core, 2 GPUs; this worker has GPU 1.
    monkeypatch.setattr(cores, "host_gpu_count", lambda: 2)
    monkeypatch.setattr(cores, "_host_cpus", lambda: tuple(range(16)))
    monkeypatch.setattr(build_pool, "thread_siblings", lambda cpu, _root="/sys": {cpu % 8, cpu % 8 + 8})
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    cores._placement.cache_clear()
    settings.EVAL_CPUS = ()
    assert _load(evaluation.pk)[2].cpus == (4,)
    assert cores.builder_cpus() == [1, 2, 3, 5, 6, 7, 9, 10, 11, 13, 14, 15]
    settings.EVAL_CPUS = (2, 6)  # the operator's: one per GPU, in GPU order
    assert _load(evaluation.pk)[2].cpus == (6,)
    assert not {2, 10, 6, 14} & set(cores.builder_cpus() or [])
    cores._placement.cache_clear()


def test_every_hardwares_queue_resolves_even_when_eval_queues_does_not_list_it(settings):
    assert "eval-a100" not in settings.RQ_QUEUES
    queue = eval_queue(Hardware(slug="a100").queue_name)
    assert queue.name == "eval-a100"
    assert settings.RQ_QUEUES[queue.name]["DEFAULT_TIMEOUT"] == settings.EVAL_JOB_TIMEOUT
    with pytest.raises(KeyError):
        django_rq.get_queue("not an evaluation queue")


def test_the_listed_queues_are_the_ones_django_rq_shows(settings):
    assert [q["name"] for q in get_queues_list()] == sorted(["default", *settings.EVAL_QUEUES])


def test_evalworker_runs_the_worker_class_named_in_the_rq_settings():
    assert get_worker_class() is EvalWorker


def test_each_gpu_worker_of_an_evalworker_gets_a_gpu_of_its_own(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,5")
    commands = worker_commands(2, "cuda", ["eval-h200"], "gpu3", {"burst": True, "max_jobs": None})
    assert [c.env["CUDA_VISIBLE_DEVICES"] for c in commands] == ["2", "5"]
    argv = commands[1].argv
    assert argv[argv.index("--name") + 1] == "gpu3.w1" and argv[argv.index("--queue") + 1] == "eval-h200"
    assert {"--no-sweep", "--no-probe", "--burst"} <= set(argv) and argv[argv.index("--workers") + 1] == "1"


def test_the_worker_count_is_the_setting_or_what_the_host_runs_well(settings, monkeypatch):
    monkeypatch.setattr("evaluation.sandbox.limits.host_cpu_count", lambda: 8)
    settings.EVAL_WORKERS = None
    assert default_worker_count("cpu") == 2
    settings.EVAL_WORKERS = 3
    assert default_worker_count("cpu") == 3


def test_the_worker_digests_the_scoring_code_before_it_forks_a_work_horse(monkeypatch):
    # RQ forks a work horse per job inside execute_job: a digest made before it is inherited, so no
    # job reads the package's files again to name the code that measured it.
    harness_digest.cache_clear()
    seen: list[int] = []
    monkeypatch.setattr(
        Worker, "execute_job", lambda self, job, queue: seen.append(harness_digest.cache_info().currsize)
    )
    EvalWorker.execute_job(object.__new__(EvalWorker), None, None)
    assert seen == [1]


def test_a_worker_asked_for_a_gpu_the_host_cannot_run_refuses_to_serve_its_queue(monkeypatch):
    # Served anyway, every CUDA kernel got the host's missing toolkit as its own compile error.
    from django.core.management import CommandError, call_command

    from leaderboard.management.commands import evalworker

    failed = {"error": "RuntimeError: CUDA requested but not available", "hardware_slug": "cpu"}
    monkeypatch.setattr(evalworker, "probe_hardware", lambda device: failed if device == "cuda" else {"device": "cpu"})
    with pytest.raises(CommandError, match="--device cuda: the hardware probe failed here .*CUDA requested"):
        call_command("evalworker", "--device", "cuda", "--queue", "eval-h100", "--burst")
    assert not Hardware.objects.filter(slug="h100").exists()
    assert evalworker.probe("auto") == {"device": "cpu"}  # asked for nothing in particular: the CPU
