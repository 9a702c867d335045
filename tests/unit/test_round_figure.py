"""A timed round's per-call figure and its number of calls (evaluation.phases.timing), on made-up
replies: on the GPU the round's check call (timed with the host's dispatch exposed) stays out of
the figure, and a round holds enough calls that a slow one cannot move it. The GPU cannot run here;
the processes are replaced by scripted replies (said so), the rules are the real ones."""

from __future__ import annotations

import types

import pytest

from evaluation.phases import timing
from evaluation.results.types import EvaluationConfig
from evaluation.sandbox.protocol import TimeReply

MS = 1_000_000  # ns


def test_on_the_gpu_the_check_call_stays_out_of_the_rounds_figure():
    # A 0.35 ms reference beside a slow kernel: two calls a round, the check call 0.1 ms longer
    # (the host's dispatch in its events). Its median read 0.40; the figure is the timed call's.
    assert timing.round_figure([int(0.35 * MS), int(0.45 * MS)], "cuda") == pytest.approx(0.35)
    assert timing.round_figure([int(0.35 * MS)] * 3 + [int(0.45 * MS)], "cuda") == pytest.approx(0.35)


def test_a_lone_check_call_is_the_rounds_figure_and_the_cpu_counts_every_call():
    assert timing.round_figure([int(20.1 * MS)], "cuda") == pytest.approx(20.1)
    assert timing.round_figure([int(0.35 * MS), int(0.45 * MS)], "cpu") == pytest.approx(0.40)


def _warmed(monkeypatch, device: str, per_call_ms: float, **cfg: object) -> tuple[int, int, float]:
    """`_warm_up` where every process's warm-up calls took ``per_call_ms``."""
    reply = TimeReply(ok=True, times_ns=[int(per_call_ms * MS)] * 5, null_host_ns=[1000] * 5)
    monkeypatch.setattr(timing, "_call", lambda pair, p, msg: (reply, 0))
    pair = types.SimpleNamespace(
        cfg=EvaluationConfig(device=device, **cfg),
        ref2=None,
        master=1,
        ref=object(),
        ker=object(),
        defence_on=lambda name: True,
    )
    return timing._warm_up(pair)


def test_a_gpu_round_of_slow_calls_still_holds_three_timed_calls_and_its_check_call(monkeypatch):
    calls, rounds, _ = _warmed(monkeypatch, "cuda", 18.0, round_target_s=0.02, timing_budget_s=4.0)
    assert calls == timing.GPU_MIN_CALLS == 4  # 0.02 s of 18 ms calls alone would be 2
    assert rounds >= 6
    assert _warmed(monkeypatch, "cpu", 18.0, round_target_s=0.02)[0] == 2  # the CPU's rounds have no check call
    assert _warmed(monkeypatch, "cuda", 0.1, round_target_s=0.02)[0] == 50  # quick calls: the cap, as before
    assert _warmed(monkeypatch, "cuda", 18.0, round_target_s=0.02, max_calls_per_round=2)[0] == 2  # never past the cap
