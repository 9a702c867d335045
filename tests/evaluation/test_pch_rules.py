"""The host's precompiled headers' rules, without a compiler (evaluation.builds.pch; the builds through
real headers: tests/evaluation/test_pch.py, the build stage's side: test_host_time.py):

- made once: builds that need them at the same moment start one builder, and a builder started
  while another holds the key's lock leaves at once, making nothing;
- waited for: a build that finds them being made waits, starts no builder of its own, and uses
  them once they are ready;
- never used half-made, and a killed header build leaves nothing behind: the next builder removes
  the dead one's private folder and its published but unproven entry before it builds.
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
import threading

import pytest

from evaluation.builds import pch
from evaluation.builds import stage as bs
from evaluation.builds.pch import MANIFEST, HeaderCache, lock_held
from evaluation.builds.stage import BuildOutcome, header_cache_for
from evaluation.results.types import EvaluationConfig
from tests.evaluation.helpers import ROOT

HOLD_LOCK = "import fcntl, os, sys, time; fd = os.open(sys.argv[1], os.O_CREAT | os.O_RDWR); fcntl.flock(fd, fcntl.LOCK_EX); print('held', flush=True); time.sleep(120)"


def _cfg(cache: str) -> EvaluationConfig:
    return EvaluationConfig(build_cache_dir=cache)


@pytest.fixture(autouse=True)
def _headers_on(monkeypatch):
    monkeypatch.setenv("KB_PCH", "1")
    monkeypatch.setattr(pch, "_BUILDERS", {})  # this process's builders: none yet


def _hold(lock_path: str) -> subprocess.Popen[str]:
    """A process holding ``lock_path``'s flock, as a builder does while it builds."""
    proc = subprocess.Popen([sys.executable, "-c", HOLD_LOCK, lock_path], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    return proc


def test_builds_that_need_the_headers_at_once_start_one_builder(tmp_path, monkeypatch):
    headers = header_cache_for(_cfg(str(tmp_path)))
    started: list[subprocess.Popen[str]] = []

    def fake_builder(spec):
        started.append(_hold(headers.lock_path))  # takes the key's lock, as builder_main does
        return started[-1]

    monkeypatch.setattr(pch, "spawn_builder", fake_builder)
    barrier = threading.Barrier(8)

    def need_them():
        barrier.wait()
        header_cache_for(_cfg(str(tmp_path))).ensure(wait_s=0.0)

    threads = [threading.Thread(target=need_them) for _ in range(8)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        assert len(started) == 1
    finally:
        for proc in started:
            proc.kill()
            proc.wait()


def test_a_builder_started_while_another_builds_leaves_making_nothing(tmp_path):
    headers = HeaderCache(str(tmp_path), "cpu")
    assert headers._prepare_root()
    holder = _hold(headers.lock_path)
    try:
        spec = {
            "root": headers.root,
            "key": headers.key,
            "device": "cpu",
            "variants": {"default": []},
            "timeout_s": 60.0,
            "hide_paths": [],
        }
        r = subprocess.run(
            [sys.executable, "-c", pch.BOOT.format(parent=pch.PACKAGE_PARENT), json.dumps(spec)],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert r.returncode == 0, r.stderr
        assert not os.path.exists(headers.path) and os.listdir(os.path.join(headers.root, ".building")) == []
    finally:
        holder.kill()
        holder.wait()


def test_a_build_waits_for_headers_being_made_and_then_uses_them(tmp_path, monkeypatch):
    cfg = _cfg(str(tmp_path))
    headers = header_cache_for(cfg)
    assert headers._prepare_root()
    monkeypatch.setattr(pch, "spawn_builder", lambda spec: pytest.fail("a second builder was started"))
    monkeypatch.setenv("KB_PCH_WAIT_S", "300")
    holder = _hold(headers.lock_path)  # somebody is making them
    os.makedirs(os.path.join(headers.include_dir, "torch", "extension.h.gch"))  # renamed in, being proven

    meanwhile: list[str | None] = []

    def proven():
        meanwhile.append(bs.build_env(cfg).get("CPATH"))  # half-made: not used
        with open(os.path.join(headers.path, MANIFEST), "w") as fh:
            json.dump({"proof": {"default": 1.0}}, fh)

    publisher = threading.Timer(0.5, proven)
    try:
        publisher.start()
        out = BuildOutcome("deferred")
        bs._prepare_headers(cfg, out)
        assert (out.headers, out.headers_why) == ("built", "")
        assert meanwhile == [None]
        assert headers.include_dir in bs.build_env(cfg)["CPATH"]
    finally:
        publisher.join()
        holder.kill()
        holder.wait()


def test_the_next_builder_removes_what_a_killed_one_left(tmp_path, monkeypatch):
    headers = HeaderCache(str(tmp_path), "cpu")
    assert headers._prepare_root()
    dead_private = os.path.join(headers.root, ".building", f"{headers.key}.4242.deadbeef")
    os.makedirs(os.path.join(dead_private, "include"))
    unproven = os.path.join(headers.include_dir, "torch", "extension.h.gch", "default.gch")
    os.makedirs(os.path.dirname(unproven))
    with open(unproven, "wb") as fh:
        fh.write(b"half a header")  # published by a builder killed during its proof: no manifest
    assert not headers.ready and headers.env() == {}

    def fake_compile(private, device, variant_flags, timeout_s, manifest):
        gch = os.path.join(private, "include", "torch", "extension.h.gch")
        os.makedirs(gch)
        with open(os.path.join(gch, "default.gch"), "wb") as fh:
            fh.write(b"a whole header")
        return ""

    monkeypatch.setattr(pch, "compile_headers", fake_compile)
    monkeypatch.setattr(pch, "prove", lambda entry, timeout_s: ("", {"default": 0.1}))
    fd = os.open(headers.lock_path, os.O_CREAT | os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # the next builder holds the lock, as builder_main does
        assert headers.build_locked(60.0) == ""
    finally:
        os.close(fd)
    assert headers.ready and not lock_held(headers.lock_path)
    assert os.listdir(os.path.join(headers.root, ".building")) == []
    with open(unproven, "rb") as fh:
        assert fh.read() == b"a whole header"
