"""Typed child replies, the process term of the speedup interval, CPU-time accounting."""

from __future__ import annotations

import math
import os

import pytest

from evaluation.phases.timing import PROCESS_SIGMA, Rounds, with_process_spread
from evaluation.results.types import EvaluationConfig
from evaluation.sandbox.protocol import CompareReply, CorrectReply, LoadReply, MalformedReply, TimeReply, parse


def test_parse_defaults_coerces_and_rejects():
    r = parse(LoadReply, {"ok": True, "import_s": 1, "flags": {"x": 2}, "unknown": 5})
    assert r.ok and r.import_s == 1.0 and isinstance(r.import_s, float) and r.flags == {"x": "2"}
    assert r.kind == "runtime_error" and r.environment == {}
    t = parse(TimeReply, {"ok": True, "times_ns": [1, 2]})
    assert t.times_ns == [1, 2] and t.host_ns == []
    c = parse(CorrectReply, {"ok": True, "ipc_layout": [{"offset": 0}], "error": None})
    assert c.ipc_layout == [{"offset": 0}] and c.error == ""
    for bad in (
        {"ok": "yes"},
        {"ok": True, "import_s": "fast"},
        {"ok": True, "import_s": True},
        {"ok": True, "environment": []},
    ):
        with pytest.raises(MalformedReply):
            parse(LoadReply, bad)
    assert parse(CompareReply, {"ok": False, "kind": "ipc_failed"}).kind == "ipc_failed"


def test_process_term_widens_the_interval():
    rounds = Rounds(calls=1, ref=[1.0] * 5, ref2=[1.0] * 5, ker=[1.0] * 5)
    lo, hi = with_process_spread(1.0, (1.0, 1.0), rounds)
    half = 1.96 * math.sqrt((2 * PROCESS_SIGMA**2 / 3) * 1.5)  # d = 0: the prior alone, shrunk
    assert lo == pytest.approx(math.exp(-half)) and hi == pytest.approx(math.exp(half))
    apart = Rounds(calls=1, ref=[1.1] * 5, ref2=[1.0] * 5, ker=[1.0] * 5)
    lo2, hi2 = with_process_spread(1.05, (1.04, 1.06), apart)
    assert lo2 < 1.0 < hi2  # two references 10 % apart: the interval reaches 1.0
    single = Rounds(calls=1, ref=[1.0] * 5, ker=[1.0] * 5)
    lo3, hi3 = with_process_spread(1.0, (0.99, 1.01), single)
    assert lo3 < 0.99 and hi3 > 1.01


def test_config_new_fields():
    assert EvaluationConfig(device="cuda").n_reference_processes == 2
    assert EvaluationConfig().n_reference_processes == 1
    assert EvaluationConfig(device="cuda", reference_processes=1).n_reference_processes == 1
    assert EvaluationConfig(cpus=[3]).cpus == (3,)
    with pytest.raises(ValueError):
        EvaluationConfig(reference_processes=3)


def test_background_cpu_accounting_reads_proc(tmp_path):
    from evaluation.sandbox.process import SandboxProcess

    p = SandboxProcess("kernel", {"workdir": str(tmp_path)}, {}, [], str(tmp_path / "log"), 1024)

    class Me:
        pid = os.getpid()

    p.proc = Me()  # type: ignore[assignment]
    before = p.cpu_seconds()
    x = 0
    for i in range(3_000_000):
        x += i
    assert p.cpu_seconds() >= before
