"""Workers sharing a GPU take turns on it (leaderboard/evaluations/gpu_turn.py): the turn is one
process's at a time, per GPU; the site's scoring function takes it only where workers share a GPU;
`evalworker` runs EVAL_WORKERS_PER_GPU workers on each GPU. (No GPU here: the turn is a lock file,
the same on any host; the GPU acceptance check runs it on the H200.)"""

from __future__ import annotations

import fcntl
import multiprocessing
import os
import queue
import shutil
import time

import pytest

from evaluation import EvaluationConfig, EvaluationResult
from leaderboard.evaluations import gpu_turn
from leaderboard.evaluations.worker_pool import default_worker_count, worker_commands

HOLD_S = 0.4


def _hold(gpu: str, out) -> None:
    with gpu_turn.gpu_turn(gpu):
        start = time.monotonic()
        time.sleep(HOLD_S)
        out.put((start, time.monotonic()))


def _spans(gpus: list[str]) -> list[tuple[float, float]]:
    ctx = multiprocessing.get_context("fork")
    out = ctx.Queue()
    procs = [ctx.Process(target=_hold, args=(gpu, out)) for gpu in gpus]
    for p in procs:
        p.start()
    spans = sorted(out.get(timeout=30) for _ in procs)
    for p in procs:
        p.join(timeout=30)
    return spans


@pytest.fixture
def var_dir(settings, tmp_path):
    settings.VAR_DIR = tmp_path
    return tmp_path


def test_one_process_at_a_time_holds_a_gpus_turn_and_each_gpu_has_its_own(var_dir):
    (a, b) = _spans(["0", "0"])
    assert b[0] >= a[1], f"the second held the turn of GPU 0 before the first let it go: {a} {b}"
    (c, d) = _spans(["0", "1"])
    assert d[0] < c[1], f"two GPUs' turns are taken at once: {c} {d}"
    assert sorted(os.listdir(var_dir / gpu_turn.TURNS_FOLDER)) == [
        "gpu-0.lock",
        "gpu-0.want",
        "gpu-1.lock",
        "gpu-1.want",
    ]


def test_a_dead_holder_leaves_the_turn_free(var_dir):
    ctx = multiprocessing.get_context("fork")
    holder = ctx.Process(target=_hold, args=("0", ctx.Queue()))
    holder.start()
    time.sleep(0.1)
    holder.kill()
    holder.join(timeout=30)
    waited: list[float] = []
    with gpu_turn.gpu_turn("0", waited):
        pass
    assert waited and waited[0] < HOLD_S


def test_a_removed_turns_folder_is_made_again(var_dir):
    with gpu_turn.gpu_turn("0"):
        pass
    shutil.rmtree(var_dir / gpu_turn.TURNS_FOLDER)  # a cleaner of var/ between two jobs of one worker
    with gpu_turn.gpu_turn("0"):
        assert (var_dir / gpu_turn.TURNS_FOLDER / "gpu-0.lock").exists()


def test_a_gpu_named_by_uuid_gets_a_plain_file_name(var_dir):
    path = gpu_turn.turn_path("GPU-1a2b/../x")
    assert os.path.dirname(path) == str(var_dir / gpu_turn.TURNS_FOLDER)
    assert os.path.basename(path) == "gpu-GPU-1a2b_.._x.lock"


@pytest.fixture
def scored(monkeypatch):
    """What the site's scoring function passes to the library's evaluate, without evaluating."""
    calls = []

    def fake(problem, kernel, config, turn=None):
        calls.append(turn)
        if turn is not None:
            with turn():
                pass
        return EvaluationResult(status="correct")

    monkeypatch.setattr(gpu_turn, "evaluate", fake)
    return calls


def test_a_worker_alone_on_its_gpu_and_a_cpu_worker_take_no_turn(settings, var_dir, scored):
    settings.EVAL_WORKERS_PER_GPU = 1
    gpu_turn.evaluate_in_turn("p", "k", EvaluationConfig(device="cuda"))
    settings.EVAL_WORKERS_PER_GPU = 2
    result = gpu_turn.evaluate_in_turn("p", "k", EvaluationConfig(device="cpu"))
    assert scored == [None, None] and "turn_wait" not in result.timings_s
    assert not (var_dir / gpu_turn.TURNS_FOLDER).exists()


def test_workers_sharing_a_gpu_wait_for_its_turn_and_say_how_long(settings, var_dir, scored, monkeypatch):
    settings.EVAL_WORKERS_PER_GPU = 2
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")
    ctx = multiprocessing.get_context("fork")
    holder = ctx.Process(target=_hold, args=("3", ctx.Queue()))
    holder.start()
    time.sleep(0.1)  # the other worker holds GPU 3's turn
    result = gpu_turn.evaluate_in_turn("p", "k", EvaluationConfig(device="cuda"))
    holder.join(timeout=30)
    assert len(scored) == 1 and scored[0] is not None
    assert HOLD_S / 2 <= result.timings_s["turn_wait"] <= HOLD_S + 5, result.timings_s


def test_evalworker_runs_the_configured_workers_on_each_gpu(settings, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,5")
    settings.EVAL_WORKERS = None
    settings.EVAL_WORKERS_PER_GPU = 2
    assert default_worker_count("cuda") == 4
    monkeypatch.setattr("evaluation.sandbox.limits.host_cpu_count", lambda: 8)
    assert default_worker_count("cpu") == 2  # a CPU host's count is its cores'
    commands = worker_commands(4, "cuda", ["eval-h200"], "gpu", {})
    assert sorted(c.env["CUDA_VISIBLE_DEVICES"] for c in commands) == ["2", "2", "5", "5"]


def _evaluation(gpu: str, hold_s: float, out) -> None:
    with gpu_turn.gpu_turn(gpu):
        start = time.monotonic()
        time.sleep(hold_s)
        out.put(("evaluation", start, time.monotonic()))


def _follow_up(gpu: str, out, go) -> None:
    turn = gpu_turn.FollowUpTurn(gpu)
    with turn.held():
        out.put(("follow-up holds", time.monotonic(), 0.0))
        go.wait(30)  # an evaluation now waits for the turn
        start = time.monotonic()
        waited = turn.pause()
        out.put(("paused", start, time.monotonic(), waited))


def test_a_follow_up_gives_the_turn_to_an_evaluation_that_waits_and_takes_it_again_after(var_dir):
    ctx = multiprocessing.get_context("fork")
    out, go = ctx.Queue(), ctx.Event()
    follow_up = ctx.Process(target=_follow_up, args=("0", out, go))
    follow_up.start()
    assert out.get(timeout=30)[0] == "follow-up holds"
    evaluation = ctx.Process(target=_evaluation, args=("0", HOLD_S, out))
    evaluation.start()
    time.sleep(0.2)  # the evaluation has said it wants the turn and waits for it
    go.set()
    got = {item[0]: item for item in (out.get(timeout=30), out.get(timeout=30))}
    for p in (follow_up, evaluation):
        p.join(timeout=30)
    _, ev_start, ev_end = got["evaluation"]
    _, pause_start, pause_end, waited = got["paused"]
    assert pause_start <= ev_start and ev_end <= pause_end, "the evaluation did not run inside the follow-up's pause"
    assert waited >= HOLD_S * 0.9


def _take_follow_up_turn(gpu: str, out) -> None:
    turn = gpu_turn.FollowUpTurn(gpu)
    with turn.held():
        out.put(("holds", time.monotonic(), turn.pause()))


def _want_only(gpu: str, holding, release) -> None:
    """An evaluation between taking its two locks: it wants the turn and does not hold it yet."""
    want = os.open(gpu_turn.turn_path(gpu, "want"), os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(want, fcntl.LOCK_SH)
    holding.set()
    release.wait(30)


def test_a_follow_up_waits_while_an_evaluation_wants_the_gpu_even_with_the_turn_free(var_dir):
    ctx = multiprocessing.get_context("fork")
    out, holding, release = ctx.Queue(), ctx.Event(), ctx.Event()
    evaluation = ctx.Process(target=_want_only, args=("0", holding, release))
    evaluation.start()
    assert holding.wait(30)
    follow_up = ctx.Process(target=_take_follow_up_turn, args=("0", out))
    follow_up.start()
    with pytest.raises(queue.Empty):
        out.get(timeout=0.5)  # the turn itself is free, and still the follow-up waits
    released = time.monotonic()
    release.set()
    what, taken, paused = out.get(timeout=30)
    for p in (evaluation, follow_up):
        p.join(timeout=30)
    assert what == "holds" and taken >= released
    assert paused == 0.0, "a pause with no evaluation waiting keeps the turn"
