"""The host's own work is never the kernel's time, and the host's headers are waited for (fast: the
build process is replaced by a stand-in, no compiler runs).

- the wait for the host's precompiled headers comes before the build's deadline starts;
- a build that times out while a header build runs, or on a host loaded beyond its cores, ends
  ``infrastructure_error`` (no verdict, nothing cached); on an idle host it stays ``timeout``;
- a recorded compile error that names the headers' folder (cached by an older release) is dropped;
- a build waits for headers being made (never skipped for that), says which it used and why none;
- a pool starts the header build before its first build needs them;
- headers published but not yet proven are never used.
"""

from __future__ import annotations

import fcntl
import json
import os
import time

import pytest

from evaluation import INFRASTRUCTURE_ERROR
from evaluation.builds import stage as bs
from evaluation.builds.pch import HeaderCache
from evaluation.builds.stage import BuildOutcome, BuildPool, build_dir_for, build_locked, header_cache_for
from evaluation.results.types import EvaluationConfig
from evaluation.sandbox.host_errors import counts_against_host

SOURCE = "from torch.utils.cpp_extension import load_inline\n# kb-host-time\n"


def _cfg(cache: str, timeout_s: float = 1.0) -> EvaluationConfig:
    return EvaluationConfig(build_cache_dir=cache, timeout_s=timeout_s)


def _locked_entry(cfg: EvaluationConfig):
    build = build_dir_for(SOURCE, cfg)
    assert build.lock(time.monotonic() + 10)
    return build


def _stand_in(monkeypatch, seen: dict, status: str = "", reply: dict | None = None) -> None:
    """The build process replaced: it records the deadline it got and ends as told."""

    def fake(build, kernel_source, cfg, deadline, out):
        seen["left_s"] = deadline - time.monotonic()
        if status:
            out.status, out.error = status, "build process: timed out"
        return dict(reply or {})

    monkeypatch.setattr(bs, "_build_slim_then_full", fake)


def _slow_headers(monkeypatch, seconds: float) -> None:
    def fake(cfg, out):
        time.sleep(seconds)
        out.headers, out.headers_s = "built", seconds

    monkeypatch.setattr(bs, "_prepare_headers", fake)


def test_the_wait_for_the_hosts_headers_is_not_the_kernels_time(tmp_path, monkeypatch):
    cfg, seen = _cfg(str(tmp_path), timeout_s=1.0), {}
    _slow_headers(monkeypatch, 1.5)  # longer than the kernel's whole budget
    _stand_in(monkeypatch, seen)
    build = _locked_entry(cfg)
    try:
        build_locked(build, SOURCE, cfg, time.monotonic() + cfg.timeout_s)
    finally:
        build.unlock()
    assert seen["left_s"] > 0.5  # the kernel's budget starts after the wait (before: -0.5 s)


def test_a_timeout_while_headers_are_built_is_the_hosts(tmp_path, monkeypatch):
    cfg = _cfg(str(tmp_path))
    monkeypatch.setattr(bs, "_prepare_headers", lambda cfg, out: None)
    _stand_in(monkeypatch, {}, status="timeout")
    locks = os.path.join(cfg.build_cache_dir, ".pch", ".locks")
    os.makedirs(locks)
    fd = os.open(os.path.join(locks, "otherkey.lock"), os.O_CREAT | os.O_RDWR, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)  # a header builder at work
    build = _locked_entry(cfg)
    try:
        out = build_locked(build, SOURCE, cfg, time.monotonic() + cfg.timeout_s)
    finally:
        build.unlock()
        os.close(fd)
    assert out.status == INFRASTRUCTURE_ERROR
    assert "building its shared headers" in (out.error or "") and "no verdict" in (out.error or "")
    assert not counts_against_host(out.error or "")  # passes with the host's work: no mark against the host
    assert not build.built and build.failure is None  # nothing cached: built again next time


@pytest.mark.parametrize(("load", "status"), [(64.0, INFRASTRUCTURE_ERROR), (0.0, "timeout")])
def test_a_timeout_on_a_loaded_host_is_the_hosts_and_on_an_idle_one_the_kernels(tmp_path, monkeypatch, load, status):
    cfg = _cfg(str(tmp_path))
    monkeypatch.setattr(bs, "_prepare_headers", lambda cfg, out: None)
    monkeypatch.setattr(os, "getloadavg", lambda: (load * (os.cpu_count() or 1), 0.0, 0.0))
    _stand_in(monkeypatch, {}, status="timeout")
    build = _locked_entry(cfg)
    try:
        out = build_locked(build, SOURCE, cfg, time.monotonic() + cfg.timeout_s)
    finally:
        build.unlock()
    assert out.status == status, out.error
    assert not build.built


def test_a_recorded_error_naming_the_headers_folder_is_dropped(tmp_path):
    cfg = _cfg(str(tmp_path))
    build = _locked_entry(cfg)
    try:
        build.begin()
        pch = os.path.join(cfg.build_cache_dir, ".pch", "k", "include", "torch", "extension.h")
        assert build.publish({"error": f"main.cpp:3:10: fatal error: {pch}: No such file or directory", "log": ""})
        assert build.built
        assert bs.recorded_failure(build) is None and not build.built  # built again, not answered from the cache
    finally:
        build.unlock()


def test_a_build_waits_for_headers_being_made_and_says_which_it_used(tmp_path, monkeypatch):
    monkeypatch.setenv("KB_PCH", "1")
    monkeypatch.delenv("KB_PCH_WAIT_S", raising=False)
    waits: list[float] = []
    monkeypatch.setattr(HeaderCache, "ensure", lambda self, wait_s=0.0: waits.append(wait_s) or True)
    out = BuildOutcome("deferred")
    bs._prepare_headers(_cfg(str(tmp_path)), out)
    assert waits and waits[0] == bs.HEADER_WAIT_S >= 600  # a header build's length: never skipped for it
    assert out.headers == "built" and out.headers_why == ""
    monkeypatch.setattr(HeaderCache, "ensure", lambda self, wait_s=0.0: False)
    out = BuildOutcome("deferred")
    bs._prepare_headers(_cfg(str(tmp_path)), out)
    assert out.headers == "none" and out.headers_why.startswith("not ready after waiting")
    monkeypatch.setenv("KB_PCH", "0")
    out = BuildOutcome("deferred")
    bs._prepare_headers(_cfg(str(tmp_path)), out)
    assert (out.headers, out.headers_why) == ("none", "off (KB_PCH=0)")
    assert {"headers", "headers_why"} <= set(out.to_dict())


def test_a_failed_header_build_is_named(tmp_path, monkeypatch):
    monkeypatch.setenv("KB_PCH", "1")
    cfg = _cfg(str(tmp_path))
    headers = header_cache_for(cfg)
    os.makedirs(headers.path)
    with open(os.path.join(headers.path, "failed.json"), "w") as fh:
        json.dump({"error": "the header build failed for ['default']", "at": time.time()}, fh)
    out = BuildOutcome("deferred")
    bs._prepare_headers(cfg, out)
    assert out.headers == "none" and "failed for ['default']" in out.headers_why


def test_a_pool_starts_the_header_build_before_the_first_build(tmp_path, monkeypatch):
    monkeypatch.setenv("KB_PCH", "1")
    started: list[float] = []
    monkeypatch.setattr(HeaderCache, "ensure", lambda self, wait_s=0.0: started.append(wait_s) or False)
    with BuildPool(1, _cfg(str(tmp_path))):
        assert started == [0.0]  # started, not waited for: the pool's first build waits


def test_headers_published_but_not_proven_are_never_used(tmp_path, monkeypatch):
    monkeypatch.setenv("KB_PCH", "1")
    headers = header_cache_for(_cfg(str(tmp_path)))
    os.makedirs(os.path.join(headers.include_dir, "torch", "extension.h.gch"))  # renamed in, proof running
    assert not headers.ready and headers.env() == {}
    assert bs.build_env(_cfg(str(tmp_path))).get("CPATH") is None
