"""A submitted kernel is evaluated end to end on the CPU by a real worker with the real scoring library."""

from leaderboard.models import Evaluation
from problems.models import Hardware

from .conftest import CORRECT_KERNEL, WRONG_KERNEL, submit


def test_it_evaluates_submitted_kernels_on_cpu_and_keeps_history(env, workers, make_kernels, cpu):
    env["EVAL_TIMING_TRIALS"] = "3"
    env["EVAL_CORRECTNESS_TRIALS"] = "2"
    good, wrong = make_kernels([CORRECT_KERNEL, WRONG_KERNEL])
    first, incorrect = submit([good, wrong], cpu)
    (same,) = submit([good], cpu)  # asked again while pending: the one pending evaluation (issue 20.3)
    assert same.pk == first.pk and first.state == Evaluation.State.QUEUED

    output = workers.run_burst()

    first.refresh_from_db()
    assert first.state == Evaluation.State.DONE, (first.failure_reason, output)
    assert first.status == Evaluation.Status.CORRECT, first.error
    assert first.attempts == 1 and first.worker_name and first.started_at and first.finished_at
    assert first.speedup > 0 and first.kernel_ms > 0 and first.reference_ms > 0
    assert first.trials_passed == first.trials_total == 2
    assert {"queue_wait", "worker_db_claim", "worker_db_store", "eval_total"} <= set(first.stage_seconds)

    # A wrong answer is a result, not a retry.
    incorrect.refresh_from_db()
    assert (incorrect.state, incorrect.status, incorrect.attempts) == ("done", "incorrect", 1)
    assert incorrect.speedup is None

    # Evaluated a second time: history is kept; the newest evaluation is the kernel's latest, and it
    # reused the build.
    (again,) = submit([good], cpu)
    output = workers.run_burst()
    again.refresh_from_db()
    assert again.status == Evaluation.Status.CORRECT
    assert again.stage_seconds["build_cached"] is True
    good.refresh_from_db()
    assert good.latest_evaluation_id == again.pk
    assert good.evaluations.count() == 2

    cpu.refresh_from_db()
    assert cpu.torch_version and cpu.last_seen_at and cpu.kind == Hardware.Kind.CPU
