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
    # Three timed calls and the check call: 0.35 without it, 0.375 with it.
    assert timing.round_figure([int(x * MS) for x in (0.30, 0.35, 0.40, 0.60)], "cuda") == pytest.approx(0.35)


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


def test_the_gpus_minimum_of_calls_gives_way_to_the_budget_for_slow_forwards(monkeypatch):
    # Six rounds of four 100 ms calls in two processes would take 4.8 s of a 4 s budget: three fit.
    assert _warmed(monkeypatch, "cuda", 100.0, round_target_s=0.02, timing_budget_s=4.0)[:2] == (3, 6)
    # A 700 ms forward keeps one call a round, six rounds: as long as before, not four times.
    assert _warmed(monkeypatch, "cuda", 700.0, round_target_s=0.02, timing_budget_s=4.0)[:2] == (1, 6)


def test_every_process_of_a_gpu_round_is_figured_without_its_check_call(monkeypatch):
    # Each process answers calls of 1.0, 1.1 and 1.2 ms and a check call of 9 ms: every side's
    # rounds read 1.1 (the median of all four would be 1.15).
    reply = TimeReply(ok=True, times_ns=[int(x * MS) for x in (1.0, 1.1, 1.2, 9.0)], host_ns=[0] * 4)
    monkeypatch.setattr(timing, "_watched_call", lambda pair, p, msg, rounds: (reply, int(12.3 * MS)))
    cfg = EvaluationConfig(device="cuda", disable_defences=frozenset({"placement", "timing_spot_check", "device_time"}))
    procs = [types.SimpleNamespace(role=role) for role in ("reference", "kernel", "reference2")]
    pair = types.SimpleNamespace(cfg=cfg, master=1, ref=procs[0], ker=procs[1], ref2=procs[2])
    pair.defence_on = lambda name: name not in cfg.disable_defences
    rounds = timing._run_rounds(pair, calls=4, n_rounds=6, null_host=0.0, out_dtypes=["float32"])
    assert len(rounds.ker) >= 6
    assert rounds.ref == rounds.ker == rounds.ref2 == [pytest.approx(1.1)] * len(rounds.ker)
